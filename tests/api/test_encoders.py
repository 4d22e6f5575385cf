"""The pure encoders: lists of agent events in, lists of wire objects out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent

from iris.events import (
    Commentary,
    Event,
    ReasoningDelta,
    SegmentEnded,
    StreamReset,
    TextDelta,
    ToolCallDelta,
    ToolEnded,
    ToolProgress,
    ToolStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.surfaces.api.chat_encoder import ChatEncoder
from iris.surfaces.api.responses_encoder import ResponsesEncoder
from iris.surfaces.api.sse import data_frame, named_frame
from tests.api.openresponses import valid_event, valid_events, valid_response

USAGE = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
CALL = {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}

AGENT_TOOL_TURN: list[Event] = [
    TurnStarted("t1", "m"),
    ReasoningDelta("hmm"),
    TextDelta("Let me "),
    TextDelta("look."),
    Commentary("Let me look."),
    ToolStarted(1, "read_file", {"path": "a"}, "c1"),
    ToolEnded(1, "read_file", True, 0.1, "42"),
    TextDelta("It is "),
    TextDelta("42."),
    SegmentEnded("It is 42."),
    TurnEnded("It is 42.", usage=USAGE),
]

CLIENT_TOOL_TURN: list[Event] = [
    TurnStarted("t1", "m"),
    TextDelta("Checking."),
    Commentary("Checking."),
    TurnEnded("Checking.", reason="tool_calls", tool_calls=[CALL], usage=USAGE),
]


def chat(
    events: list[Event], include_usage: bool = False
) -> tuple[ChatEncoder, list[dict[str, Any]]]:
    encoder = ChatEncoder("chatcmpl-1", "m", 0, include_usage=include_usage)
    return encoder, [chunk for event in events for chunk in encoder.feed(event)]


def content(chunks: list[dict[str, Any]]) -> str:
    return "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
    )


# -- chat -------------------------------------------------------------------------------


def test_chat_joins_commentary_and_answer_with_a_blank_line() -> None:
    encoder, chunks = chat(AGENT_TOOL_TURN)
    assert content(chunks) == "Let me look.\n\nIt is 42."
    assert encoder.completion()["choices"][0]["message"]["content"] == "Let me look.\n\nIt is 42."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    for chunk in chunks:  # every chunk is one the SDK parses
        ChatCompletionChunk.model_validate(chunk)


def test_chat_never_repeats_role_id_or_name() -> None:
    _, chunks = chat(
        [
            *CLIENT_TOOL_TURN[:-1],
            TurnEnded("", reason="tool_calls", tool_calls=[CALL, {**CALL, "id": "call_2"}]),
        ]
    )
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert [d.get("role") for d in deltas].count("assistant") == 1
    calls = [call for d in deltas for call in d.get("tool_calls", [])]
    assert [c.get("id") for c in calls] == ["call_1", None, "call_2", None]
    assert [c["index"] for c in calls] == [0, 0, 1, 1]
    assert [c["function"].get("name") for c in calls] == ["get_weather", None, "get_weather", None]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_chat_usage_chunk_only_when_asked() -> None:
    _, plain = chat(AGENT_TOOL_TURN)
    assert all(c["choices"] for c in plain)
    _, with_usage = chat(AGENT_TOOL_TURN, include_usage=True)
    assert with_usage[-1]["choices"] == []
    assert with_usage[-1]["usage"] == {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
    }


def test_chat_failure_is_an_in_band_error_after_the_partial_text() -> None:
    encoder, chunks = chat(
        [
            TurnStarted("t", "m"),
            TextDelta("Hel"),
            TurnFailed("provider_error", "boom", partial_text="Hel"),
        ]
    )
    assert content(chunks) == "Hel"
    assert chunks[-1] == {
        "error": {
            "message": "boom",
            "type": "server_error",
            "param": None,
            "code": "provider_error",
        }
    }
    assert encoder.failure is not None


def test_chat_stream_reset_does_not_repeat_text_the_client_has() -> None:
    events: list[Event] = [
        TurnStarted("t", "m"),
        TextDelta("Hello "),
        TextDelta("wor"),
        StreamReset("fallback"),
        TextDelta("Hello"),
        TextDelta(" world!"),
        SegmentEnded("Hello world!"),
        TurnEnded("Hello world!"),
    ]
    _, chunks = chat(events)
    assert content(chunks) == "Hello world!"


def test_chat_text_held_back_by_the_agent_is_sent_at_the_segment_end() -> None:
    _, chunks = chat(
        [TurnStarted("t", "m"), TextDelta("Hi"), SegmentEnded("Hi there"), TurnEnded("Hi there")]
    )
    assert content(chunks) == "Hi there"


def test_reasoning_is_never_in_content() -> None:
    _, chunks = chat(AGENT_TOOL_TURN)
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks)
    assert reasoning == "hmm"
    assert "hmm" not in content(chunks)


# -- responses ---------------------------------------------------------------------------


def responses(events: list[Event]) -> tuple[ResponsesEncoder, list[dict[str, Any]]]:
    """Encode ``events``; every payload and the final response pass the Open Responses
    specification's models."""
    encoder = ResponsesEncoder("resp_1", "m", 0, {"tools": []})
    payloads = valid_events([payload for event in events for payload in encoder.feed(event)])
    if encoder.response is not None:
        valid_response(encoder.response)
    return encoder, payloads


def sdk_accepts(payloads: list[dict[str, Any]]) -> Any:
    """Run the events through the openai SDK's own stream state machine (what
    ``responses.stream()`` uses); it raises on any ordering or identity mistake."""
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    for payload in payloads:
        event = construct_type(type_=ResponseStreamEvent, value=payload)
        state.handle_event(event)  # type: ignore[arg-type]
    return state._completed_response  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize(
    "events", [AGENT_TOOL_TURN, CLIENT_TOOL_TURN], ids=["agent-tools", "client-tools"]
)
def test_responses_sequence_is_what_the_sdk_accepts(events: list[Event]) -> None:
    encoder, payloads = responses(events)
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    final = sdk_accepts(payloads)
    assert final is not None and final.status == "completed"
    assert encoder.response is not None and final.id == encoder.response["id"]


def test_responses_items_for_a_tool_using_turn() -> None:
    encoder, _ = responses(AGENT_TOOL_TURN)
    assert encoder.response is not None
    output = encoder.response["output"]
    # The agent's own tool run shows as an mcp_call between the commentary and the answer.
    assert [item["type"] for item in output] == ["reasoning", "message", "mcp_call", "message"]
    assert output[1]["phase"] == "commentary" and "phase" not in output[3]
    assert output[3]["content"][0]["text"] == "It is 42."
    assert encoder.response["usage"]["total_tokens"] == 15


def test_responses_client_tool_call_items() -> None:
    encoder, payloads = responses(CLIENT_TOOL_TURN)
    assert encoder.response is not None
    call = encoder.response["output"][-1]
    assert {k: call[k] for k in ("type", "call_id", "name", "arguments", "status")} == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    }
    types = [p["type"] for p in payloads]
    assert types.index("response.function_call_arguments.delta") < types.index(
        "response.function_call_arguments.done"
    )


STREAMED_CALLS_TURN: list[Event] = [
    TurnStarted("t1", "m"),
    ReasoningDelta("hmm"),
    TextDelta("Checking."),
    ToolCallDelta(0, '{"city"', "call_1", "get_weather"),
    ToolCallDelta(1, "", "call_2", "get_weather"),
    ToolCallDelta(0, ': "Paris"}'),
    ToolCallDelta(1, '{"city": "Oslo"}'),
    Commentary("Checking."),
    TurnEnded(
        "Checking.",
        reason="tool_calls",
        tool_calls=[CALL, {"id": "call_2", "name": "get_weather", "arguments": '{"city": "Oslo"}'}],
        usage=USAGE,
    ),
]


def test_chat_streams_calls_as_they_form_and_never_repeats_their_head() -> None:
    encoder, chunks = chat(STREAMED_CALLS_TURN)
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
    deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
    calls = [call for d in deltas for call in d.get("tool_calls") or ()]
    assert [(c["index"], c.get("id"), c["function"].get("name")) for c in calls] == [
        (0, "call_1", "get_weather"),
        (1, "call_2", "get_weather"),
        (0, None, None),
        (1, None, None),
    ]
    joined = {
        index: "".join(c["function"]["arguments"] for c in calls if c["index"] == index)
        for index in (0, 1)
    }
    assert joined == {0: '{"city": "Paris"}', 1: '{"city": "Oslo"}'}
    # Each fragment went out when it came, before the turn ended.
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert encoder.completion()["choices"][0]["message"]["tool_calls"][1]["id"] == "call_2"


def test_chat_sends_the_rest_of_a_call_the_provider_completed_at_the_end() -> None:
    events: list[Event] = [
        TurnStarted("t", "m"),
        ToolCallDelta(0, '{"city"', "call_1", "get_weather"),
        TurnEnded("", reason="tool_calls", tool_calls=[CALL]),
    ]
    _, chunks = chat(events)
    calls = [
        call
        for c in chunks
        if c.get("choices")
        for call in c["choices"][0]["delta"].get("tool_calls") or ()
    ]
    assert "".join(c["function"]["arguments"] for c in calls) == CALL["arguments"]
    assert sum(1 for c in calls if "id" in c) == 1


def test_responses_streams_calls_as_they_form() -> None:
    encoder, payloads = responses(STREAMED_CALLS_TURN)
    final = sdk_accepts(payloads)
    assert final is not None and final.status == "completed"
    types = [p["type"] for p in payloads]
    # The commentary closes before the first call's item is added; both calls' fragments
    # stream before the turn's end.
    first_call = next(
        i
        for i, p in enumerate(payloads)
        if p["type"] == "response.output_item.added" and p["item"]["type"] == "function_call"
    )
    assert types.index("response.output_text.done") < first_call
    fragments = [
        (p["output_index"], p["delta"])
        for p in payloads
        if p["type"] == "response.function_call_arguments.delta"
    ]
    assert fragments == [(2, '{"city"'), (2, ': "Paris"}'), (3, '{"city": "Oslo"}')]
    assert encoder.response is not None
    output = encoder.response["output"]
    assert [item["type"] for item in output] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
    ]
    assert output[1]["phase"] == "commentary"
    assert [item["arguments"] for item in output[2:]] == [
        '{"city": "Paris"}',
        '{"city": "Oslo"}',
    ]


def test_responses_snapshot_shows_a_call_being_streamed() -> None:
    encoder = ResponsesEncoder("resp_1", "m", 0)
    for event in STREAMED_CALLS_TURN[:4]:
        encoder.feed(event)
    output = encoder.snapshot()["output"]
    assert output[-1]["type"] == "function_call"
    assert (output[-1]["status"], output[-1]["arguments"]) == ("in_progress", '{"city"')


def test_responses_a_call_cut_by_a_failure_is_incomplete() -> None:
    encoder, payloads = responses(
        [
            TurnStarted("t", "m"),
            ToolCallDelta(0, '{"ci', "call_1", "get_weather"),
            TurnFailed("upstream_error", "the provider went away"),
        ]
    )
    assert encoder.response is not None
    assert encoder.response["output"][0]["status"] == "incomplete"
    assert encoder.response["output"][0]["arguments"] == '{"ci'
    assert [p["type"] for p in payloads][-2:] == ["error", "response.failed"]


def test_responses_text_after_a_call_is_a_new_message_after_it() -> None:
    encoder, payloads = responses(
        [
            TurnStarted("t", "m"),
            ToolCallDelta(0, "{}", "call_1", "f"),
            TextDelta("and more"),
            SegmentEnded("and more"),
            TurnEnded(
                "and more",
                reason="tool_calls",
                tool_calls=[{"id": "call_1", "name": "f", "arguments": "{}"}],
            ),
        ]
    )
    sdk_accepts(payloads)
    assert encoder.response is not None
    assert [i["type"] for i in encoder.response["output"]] == ["function_call", "message"]


def test_responses_failure_is_error_then_failed() -> None:
    encoder, payloads = responses(
        [TurnStarted("t", "m"), TextDelta("Hel"), TurnFailed("rate_limited", "slow down")]
    )
    assert [p["type"] for p in payloads][-2:] == ["error", "response.failed"]
    assert payloads[-1]["response"]["status"] == "failed"
    assert payloads[-1]["response"]["error"] == {"code": "rate_limited", "message": "slow down"}
    assert payloads[-1]["response"]["output"][0]["status"] == "incomplete"
    assert encoder.failure is not None


# -- framing -----------------------------------------------------------------------------


def test_frames() -> None:
    assert data_frame({"a": "é"}) == 'data: {"a":"é"}\n\n'.encode()
    assert (
        named_frame({"type": "response.created"})
        == b'event: response.created\ndata: {"type":"response.created"}\n\n'
    )


# -- reasoning as Open Responses defines it -----------------------------------------------

RAW_REASONING_TURN: list[Event] = [
    TurnStarted("t1", "m"),
    ReasoningDelta("Let me "),
    ReasoningDelta("think."),
    TextDelta("Done."),
    SegmentEnded("Done."),
    TurnEnded("Done.", usage=USAGE),
]


def test_raw_reasoning_is_content_with_reasoning_text_events_and_no_summary() -> None:
    encoder, payloads = responses(RAW_REASONING_TURN)
    types = [p["type"] for p in payloads]
    deltas = [p["delta"] for p in payloads if p["type"] == "response.reasoning_text.delta"]
    assert deltas == ["Let me ", "think."]
    assert "response.reasoning_summary_text.delta" not in types
    assert "response.reasoning_summary_part.added" not in types
    done = next(p for p in payloads if p["type"] == "response.reasoning_text.done")
    assert done["text"] == "Let me think."
    assert encoder.response is not None
    item = encoder.response["output"][0]
    assert item["content"] == [{"type": "reasoning_text", "text": "Let me think."}]
    assert item["summary"] == []
    assert sdk_accepts(payloads) is not None


def test_a_provider_summary_is_the_summary() -> None:
    encoder, payloads = responses(
        [
            TurnStarted("t1", "m"),
            ReasoningDelta("Short ", summary=True),
            ReasoningDelta("plan.", summary=True),
            TextDelta("Done."),
            SegmentEnded("Done."),
            TurnEnded("Done.", usage=USAGE),
        ]
    )
    types = [p["type"] for p in payloads]
    assert "response.reasoning_text.delta" not in types
    assert encoder.response is not None
    item = encoder.response["output"][0]
    assert item["summary"] == [{"type": "summary_text", "text": "Short plan."}]
    assert item["content"] == []
    assert sdk_accepts(payloads) is not None


def test_snapshot_shows_the_output_so_far() -> None:
    encoder = ResponsesEncoder("resp_1", "m", 0, {"background": True})
    assert valid_response(encoder.snapshot()).status == "queued"
    for event in [TurnStarted("t", "m"), ReasoningDelta("hmm"), TextDelta("Hal")]:
        encoder.feed(event)
    current = encoder.snapshot()
    valid_response(current)
    assert current["status"] == "in_progress"
    assert [item["type"] for item in current["output"]] == ["reasoning", "message"]
    assert current["output"][1]["content"][0]["text"] == "Hal"


def test_stop_ends_the_stream_with_incomplete_and_the_status_given() -> None:
    encoder = ResponsesEncoder("resp_1", "m", 0, {})
    payloads = [p for e in [TurnStarted("t", "m"), TextDelta("Hal")] for p in encoder.feed(e)]
    payloads += encoder.stop("cancelled", "cancelled")
    valid_events(payloads)
    assert payloads[-1]["type"] == "response.incomplete"
    assert payloads[-1]["response"]["status"] == "cancelled"
    assert payloads[-1]["response"]["output"][0]["status"] == "incomplete"
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    assert encoder.stop("cancelled", "cancelled") == [], "a stopped turn stays stopped"


def test_the_error_event_fits_both_the_sdk_and_the_specification() -> None:
    _, payloads = responses([TurnStarted("t", "m"), TurnFailed("rate_limited", "slow down")])
    error = next(p for p in payloads if p["type"] == "error")
    assert (error["code"], error["message"]) == ("rate_limited", "slow down")
    valid_event(error)


# -- what the segment model fixed (each failed before the encoders consumed it) ---------------


def test_chat_sends_held_back_text_after_a_replay_that_repeated_the_sent_text() -> None:
    _, chunks = chat(
        [
            TurnStarted("t", "m"),
            TextDelta("Hel"),
            StreamReset("retry"),
            TextDelta("Hel"),
            SegmentEnded("Hello"),
            TurnEnded("Hello"),
        ]
    )
    assert content(chunks) == "Hello"


def test_chat_shows_the_segment_after_a_dropped_attempt_on_its_own() -> None:
    _, chunks = chat(
        [
            TurnStarted("t", "m"),
            TextDelta("Let me"),
            StreamReset("falling back to b", "b"),
            ToolStarted(1, "read_file", {"path": "a"}, "c1"),
            ToolEnded(1, "read_file", True, 0.1, "42"),
            Commentary("earlier conversation dropped"),
            TextDelta("42."),
            SegmentEnded("42."),
            TurnEnded("42."),
        ]
    )
    assert content(chunks) == "Let me\n\nearlier conversation dropped\n\n42."


def output_text(payloads: list[dict[str, Any]]) -> str:
    return "".join(p["delta"] for p in payloads if p["type"] == "response.output_text.delta")


def test_responses_replayed_reasoning_does_not_resend_the_text() -> None:
    encoder, payloads = responses(
        [
            TurnStarted("t", "m"),
            ReasoningDelta("hmm"),
            TextDelta("Hel"),
            StreamReset("falling back to b", "b"),
            ReasoningDelta("hmm"),
            TextDelta("Hello"),
            SegmentEnded("Hello"),
            TurnEnded("Hello"),
        ]
    )
    assert output_text(payloads) == "Hello"
    assert encoder.response is not None
    texts = [i["content"][0]["text"] for i in encoder.response["output"] if i["type"] == "message"]
    assert "".join(texts) == "Hello"
    assert sdk_accepts(payloads) is not None


def test_responses_reasoning_inside_a_segment_does_not_repeat_its_text() -> None:
    encoder, payloads = responses(
        [
            TurnStarted("t", "m"),
            TextDelta("A "),
            ReasoningDelta("r"),
            TextDelta("B"),
            SegmentEnded("A B"),
            TurnEnded("A B"),
        ]
    )
    assert output_text(payloads) == "A B"
    assert encoder.response is not None
    texts = [i["content"][0]["text"] for i in encoder.response["output"] if i["type"] == "message"]
    assert texts == ["A ", "B"], "each message item ends with the text it was sent"
    assert sdk_accepts(payloads) is not None


def test_responses_a_cut_short_message_is_incomplete_however_it_was_closed() -> None:
    for closer in ([SegmentEnded("Hel")], []):
        encoder, _ = responses(
            [
                TurnStarted("t", "m"),
                TextDelta("Hel"),
                *closer,
                TurnEnded("Hel", reason="interrupted"),
            ]
        )
        assert encoder.response is not None
        assert encoder.response["output"][0]["status"] == "incomplete"
        encoder, _ = responses(
            [TurnStarted("t", "m"), TextDelta("Hel"), *closer, TurnFailed("x", "boom", True, "Hel")]
        )
        assert encoder.response is not None
        assert encoder.response["output"][0]["status"] == "incomplete"


def test_a_tool_run_cut_by_the_turns_end_closes_as_an_incomplete_mcp_call() -> None:
    encoder = ResponsesEncoder("resp_1", "m", 0, {"tools": []})
    events: list[Event] = [
        TurnStarted("t1", "m"),
        ToolStarted(1, "terminal", {"command": "sleep 60"}, "c1"),
        ToolProgress(1, "terminal", "still sleeping"),
    ]
    payloads = [payload for event in events for payload in encoder.feed(event)]
    snapshot = encoder.snapshot()
    assert snapshot["output"][-1]["status"] == "in_progress"
    payloads += encoder.stop("cancelled", "cancelled")
    valid_events(payloads)
    run = payloads[-1]["response"]["output"][-1]
    assert (run["type"], run["status"], run["output"]) == ("mcp_call", "incomplete", None)
    types = [p["type"] for p in payloads]
    assert "response.mcp_call.completed" not in types and "response.mcp_call.failed" not in types
    note = [p for p in payloads if p["type"] == "response.mcp_call.in_progress"][-1]
    assert note["note"] == "still sleeping"


@given(st.lists(st.text(), min_size=1, max_size=5))
def test_a_text_chunk_is_the_same_bytes_however_it_is_made(deltas: list[str]) -> None:
    """Issue 45: a text delta's chunk is written from a shape encoded once; a client reads
    exactly what encoding the whole chunk gives, whatever the text holds (quotes, controls,
    surrogates' replacements, line separators)."""
    encoder = ChatEncoder("chatcmpl-1", 'm"odel\u2028', 1700000000)
    encoder.feed(TurnStarted("turn_1", "m"))
    for delta in deltas:
        for chunk in encoder.feed(TextDelta(delta)):
            whole = json.dumps(dict(chunk), separators=(",", ":"), ensure_ascii=False)
            assert data_frame(chunk) == f"data: {whole}\n\n".encode()

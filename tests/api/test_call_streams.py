"""Property: however a provider cuts and interleaves its tool calls' fragments, the round
builder streams each call once (head first, never repeated) and both encoders give the client
exactly the calls the turn ended with — the Python SDK's accumulator and stream state machine
agree."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent

from iris.agent.round import CallStream, RoundBuilder
from iris.events import Event, TextDelta, ToolCallDelta, TurnEnded, TurnStarted
from iris.llm.provider import RawDelta, RawText, RawToolCall
from iris.surfaces.api.chat_encoder import ChatEncoder
from iris.surfaces.api.responses_encoder import ResponsesEncoder
from tests.strategies import split_deltas

ARGS = st.dictionaries(
    st.sampled_from(["city", "path", "text"]), st.text('aé "\\{}🙂', max_size=12), max_size=3
)


@st.composite
def provider_stream(draw: st.DrawFn) -> tuple[list[RawDelta], list[dict[str, str]]]:
    """Raw deltas of one round: optional text, then 1-3 calls whose fragments interleave;
    a provider that ends a call with the whole of it (``complete``) may repeat it at the end.
    The calls come back in the order they began: the order the turn streams them in."""
    count = draw(st.integers(1, 3))
    calls = [
        {"id": f"call_{n}", "name": f"tool_{n}", "arguments": json.dumps(draw(ARGS))}
        for n in range(count)
    ]
    queues = [
        [RawToolCall(n, call["id"], call["name"])]
        + [RawToolCall(n, arguments=piece) for piece in draw(split_deltas(call["arguments"]))]
        for n, call in enumerate(calls)
    ]
    raws: list[RawDelta] = [RawText(t) for t in draw(st.lists(st.sampled_from(["Hi", " so"])))]
    began: list[int] = []  # provider indexes in the order their calls began
    while any(queues):
        n = draw(st.sampled_from([i for i, q in enumerate(queues) if q]))
        if queues[n][0].name:
            began.append(n)
        raws.append(queues[n].pop(0))
    if draw(st.booleans()):
        raws += [
            RawToolCall(n, arguments=c["arguments"], complete=True) for n, c in enumerate(calls)
        ]
    return raws, [calls[n] for n in began]


def turn_events(raws: list[RawDelta], calls: list[dict[str, str]]) -> list[Event]:
    builder = RoundBuilder(stream_calls=CallStream(lambda p: f"made_{p}"))
    events: list[Event] = [TurnStarted("t", "m")]
    for raw in raws:
        events += builder.feed(raw)
    events += builder.finish()
    ended = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in builder.tool_calls()]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    events.append(TurnEnded(text, reason="tool_calls", tool_calls=ended))
    assert ended == calls
    return events


@settings(max_examples=50, deadline=None)
@given(provider_stream())
def test_every_call_streams_once_and_adds_up(
    drawn: tuple[list[RawDelta], list[dict[str, str]]],
) -> None:
    raws, calls = drawn
    events = turn_events(raws, calls)
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    heads = [(d.index, d.call_id, d.name) for d in deltas if d.call_id]
    assert heads == [(n, c["id"], c["name"]) for n, c in enumerate(calls)]
    for n, call in enumerate(calls):
        assert "".join(d.arguments for d in deltas if d.index == n) == call["arguments"]
        assert not any(d.name for d in deltas if d.index == n and not d.call_id)

    # Chat: the SDK's own accumulator rebuilds the calls from the chunks.
    chat = ChatEncoder("chatcmpl-1", "m", 0)
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for event in events:
        for chunk in chat.feed(event):
            state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    message = state.get_final_completion().choices[0].message
    rebuilt = sorted(
        (c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []
    )
    assert rebuilt == sorted((c["id"], c["name"], c["arguments"]) for c in calls)

    # Responses: the SDK's stream state machine accepts the events and ends with the calls.
    responses = ResponsesEncoder("resp_1", "m", 0)
    machine: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in events:
        for payload in responses.feed(event):
            machine.handle_event(construct_type(type_=ResponseStreamEvent, value=payload))  # type: ignore[arg-type]
    final = machine._completed_response  # pyright: ignore[reportPrivateUsage]
    assert final is not None
    got = [(i.call_id, i.name, i.arguments) for i in final.output if i.type == "function_call"]
    assert sorted(got) == sorted((c["id"], c["name"], c["arguments"]) for c in calls)

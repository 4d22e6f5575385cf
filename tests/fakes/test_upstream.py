"""The fake upstream speaks the wire formats the official openai SDK parses and validates."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import httpx
import openai
import pytest
from openai import AsyncOpenAI, OpenAI
from openai.types.chat import ChatCompletionMessageParam

from tests.fakes.upstream import (
    FakeUpstream,
    drop,
    error,
    gated,
    hold,
    reasoning,
    reject_stream,
    responder,
    responses_text,
    responses_tool_call,
    stream_error,
    text,
    tool_call,
    tool_calls,
)

pytestmark = pytest.mark.timeout(10)

MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]


@pytest.fixture
def client(upstream: FakeUpstream) -> Iterator[OpenAI]:
    with OpenAI(base_url=upstream.base_url, api_key="sk-test", max_retries=0) as sdk:
        yield sdk


def test_streamed_text_with_usage_chunk(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(text("Hel", "lo", usage=(7, 2)))
    stream = client.chat.completions.create(
        model="fake-model",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "Hello"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None and last.usage.total_tokens == 9
    # The fake marks the body written just after its last write: the client may be first.
    assert upstream.finished.wait(5)
    assert upstream.requests[0].body["messages"] == MESSAGES
    assert upstream.requests[0].headers["authorization"] == "Bearer sk-test"


def test_no_usage_chunk_unless_asked(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(text("a"))
    chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    assert all(chunk.choices for chunk in chunks)


def test_reasoning_content_precedes_content(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(reasoning(["pla", "n"], ["Ans", "wer"]), reasoning(["x"], ["y"], "reasoning"))
    order: list[tuple[str, str]] = []
    for chunk in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):
        delta = chunk.choices[0].delta
        extra = delta.model_extra or {}
        if "reasoning_content" in extra:
            order.append(("reasoning", extra["reasoning_content"]))
        if delta.content:
            order.append(("content", delta.content))
    assert order == [
        ("reasoning", "pla"),
        ("reasoning", "n"),
        ("content", "Ans"),
        ("content", "wer"),
    ]
    second = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    assert "".join(getattr(c.choices[0].delta, "reasoning", None) or "" for c in second) == "x"


def test_think_tags_arrive_as_plain_content(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(text("<thi", "nk>plan</th", "ink>Answer"))
    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    assert [c.choices[0].delta.content for c in stream if c.choices[0].delta.content] == [
        "<thi",
        "nk>plan</th",
        "ink>Answer",
    ]


def test_tool_call_fragments_accumulate(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(tool_call("get_weather", ['{"ci', 'ty": "Pa', 'ris"}'], content="Checking"))
    # .stream() runs the SDK's accumulate_delta, which breaks on repeated ids or names.
    with client.chat.completions.stream(model="m", messages=MESSAGES) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking"
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("call_1", "get_weather", '{"city": "Paris"}')
    ]


def test_several_tool_calls(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(tool_calls([("a", ['{"x"', ":1}"]), ("b", ["{}"])]))
    with client.chat.completions.stream(model="m", messages=MESSAGES) as stream:
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls or []
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("call_1", "a", {"x": 1}),
        ("call_2", "b", {}),
    ]


def test_drop_breaks_the_stream_mid_iteration(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(drop("par", "tial"))
    seen: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):
            seen.append(chunk.choices[0].delta.content or "")
    assert "".join(seen) == "partial"
    assert not upstream.finished.is_set()


def test_drop_on_responses_and_non_streaming(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(drop("a"), drop("b"))
    with pytest.raises(openai.APIConnectionError):
        list(client.responses.create(model="m", input="hi", stream=True))
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=MESSAGES)


async def test_hold_notices_client_disconnect(upstream: FakeUpstream) -> None:
    upstream.script(hold("first"))
    async with AsyncOpenAI(base_url=upstream.base_url, api_key="k", max_retries=0) as client:
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        async for chunk in stream:
            if chunk.choices[0].delta.content == "first":
                break
        assert upstream.gate_reached.wait(2)
        assert not upstream.disconnected.is_set()
        await stream.close()
    detected = await asyncio.to_thread(upstream.disconnected.wait, 2)
    assert detected and upstream.disconnected_at is not None
    assert not upstream.finished.is_set()


async def test_gate_proves_first_delta_arrives_before_upstream_finishes(
    upstream: FakeUpstream,
) -> None:
    upstream.script(gated("one", "two", "three"))
    async with AsyncOpenAI(base_url=upstream.base_url, api_key="k", max_retries=0) as client:
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        received: list[str] = []
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
                if len(received) == 1:
                    assert not upstream.finished.is_set()
                    upstream.release()
    assert received == ["one", "two", "three"]
    # The client's stream ends at [DONE]; the fake notes its end after its last write returns.
    assert upstream.finished.wait(5)
    assert len(upstream.delta_times) == 3
    assert upstream.finished_at is not None and upstream.finished_at >= upstream.delta_times[-1]


def test_hold_then_release_completes(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(hold("a", "b"))
    threading.Timer(0.05, upstream.release).start()
    out = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in out) == "ab"


def test_rate_limit_with_retry_after(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(error(429, "slow down", retry_after=2, code="rate_limit_exceeded"))
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    assert caught.value.response.headers["retry-after"] == "2"
    assert caught.value.code == "rate_limit_exceeded"
    assert "slow down" in caught.value.message


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, openai.BadRequestError),
        (401, openai.AuthenticationError),
        (500, openai.InternalServerError),
    ],
)
def test_http_errors_map_to_sdk_errors(
    upstream: FakeUpstream, client: OpenAI, status: int, kind: type[Exception]
) -> None:
    upstream.script(error(status, "nope"))
    with pytest.raises(kind):
        client.responses.create(model="m", input="hi")


def test_reject_stream_only_rejects_streaming(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(reject_stream("fine"), reject_stream("fine"))
    with pytest.raises(openai.BadRequestError, match="stream is not supported"):
        client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    answer = client.chat.completions.create(model="m", messages=MESSAGES)
    assert answer.choices[0].message.content == "fine"


def test_error_after_the_200(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(stream_error("so far", message="overloaded"), stream_error("x"))
    seen: list[str] = []
    with pytest.raises(openai.APIError, match="overloaded"):
        for chunk in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):
            seen.append(chunk.choices[0].delta.content or "")
    assert "".join(seen) == "so far"
    events = list(client.responses.create(model="m", input="hi", stream=True))
    assert [e.type for e in events][-2:] == ["error", "response.failed"]


def test_responses_stream_is_accepted_by_the_sdk_validator(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(responses_text("Hel", "lo", reasoning=["think", "ing"]))
    with client.responses.stream(model="m", input="hi") as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert final.output_text == "Hello"
    assert final.usage is not None and final.usage.total_tokens == 15
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types.count("response.reasoning_summary_text.delta") == 2
    assert types.count("response.output_text.delta") == 2
    assert types[-1] == "response.completed"
    reasoning_item = final.output[0]
    assert reasoning_item.type == "reasoning"
    assert reasoning_item.summary[0].text == "thinking"


async def test_responses_tool_call_stream(upstream: FakeUpstream) -> None:
    upstream.script(responses_tool_call("lookup", ['{"q":', '"x"}'], call_id="call_9"))
    async with (
        AsyncOpenAI(base_url=upstream.base_url, api_key="k", max_retries=0) as client,
        client.responses.stream(model="m", input="hi") as stream,
    ):
        deltas = [
            e.delta async for e in stream if e.type == "response.function_call_arguments.delta"
        ]
        final = await stream.get_final_response()
    assert deltas == ['{"q":', '"x"}']
    call = final.output[0]
    assert call.type == "function_call"
    assert (call.call_id, call.name, call.arguments) == ("call_9", "lookup", '{"q":"x"}')


def test_event_lines_match_types_and_sequence(upstream: FakeUpstream) -> None:
    upstream.script(responses_text("a"))
    body = {"model": "m", "input": "hi", "stream": True}
    raw = httpx.post(f"{upstream.base_url}/responses", json=body).text
    blocks = [b for b in raw.split("\n\n") if b]
    assert blocks[-1] == "data: [DONE]"
    for number, block in enumerate(blocks[:-1]):
        event_line, data_line = block.split("\n")
        payload = json.loads(data_line.removeprefix("data: "))
        assert event_line == f"event: {payload['type']}"
        assert payload["sequence_number"] == number
    writes = [s.data for s in upstream.sends]
    assert all(w.endswith(b"\n\n") and w.count(b"\n\n") == 1 for w in writes)


def test_non_streaming_both_apis(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(
        text("Hi", " there", model="other"),
        tool_call("f", ["{}"]),
        responses_text("Hey"),
        reasoning(["r"], ["t"]),
    )
    chat = client.chat.completions.create(model="m", messages=MESSAGES)
    assert chat.object == "chat.completion"
    assert (chat.model, chat.choices[0].message.content) == ("other", "Hi there")
    assert chat.usage is not None and chat.usage.prompt_tokens == 10
    called = client.chat.completions.create(model="m", messages=MESSAGES)
    assert called.choices[0].finish_reason == "tool_calls"
    assert called.choices[0].message.tool_calls is not None
    response = client.responses.create(model="m", input="hi")
    assert (response.status, response.output_text) == ("completed", "Hey")
    thought = client.responses.create(model="m", input="hi")
    assert thought.output[0].type == "reasoning" and thought.output_text == "t"


def test_unexpected_request_is_a_500_and_recorded(upstream: FakeUpstream, client: OpenAI) -> None:
    with pytest.raises(openai.InternalServerError, match="unexpected request"):
        client.chat.completions.create(model="m", messages=MESSAGES)
    assert [r.path for r in upstream.unexpected] == ["/v1/chat/completions"]
    with pytest.raises(AssertionError, match="unexpected"):
        upstream.assert_used_up()


def test_models_lists_a_model(upstream: FakeUpstream, client: OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["fake-model"]


def test_delay_spaces_the_deltas(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(text("a", "b", "c", delay=0.02))
    list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    times = upstream.delta_times
    assert all(later - earlier >= 0.015 for earlier, later in zip(times, times[1:], strict=False))


def test_stopping_with_a_held_stream_leaves_no_thread() -> None:
    before = set(threading.enumerate())
    with FakeUpstream() as up:
        up.script(hold("x"))
        sdk = OpenAI(base_url=up.base_url, api_key="k", max_retries=0)
        stream = sdk.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        assert next(iter(stream)).choices[0].delta.role == "assistant"
        assert up.gate_reached.wait(2)
    with pytest.raises(openai.APIConnectionError):
        list(stream)
    sdk.close()
    assert set(threading.enumerate()) <= before


async def test_gate_works_on_responses_too(upstream: FakeUpstream) -> None:
    upstream.script(responses_text("one", "two", gate_after=1))
    async with (
        AsyncOpenAI(base_url=upstream.base_url, api_key="k", max_retries=0) as client,
        client.responses.stream(model="m", input="hi") as stream,
    ):
        async for event in stream:
            if event.type == "response.output_text.delta" and event.delta == "one":
                assert not upstream.finished.is_set()
                upstream.release()
        final = await stream.get_final_response()
    assert final.output_text == "onetwo"


def test_gate_can_be_closed_again(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(gated("a", "b"), hold("c"))
    upstream.release()
    first = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in first) == "ab"
    upstream.reset_gate()
    second = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    chunks = iter(second)
    assert [next(chunks).choices[0].delta.content for _ in range(2)] == ["", "c"]
    assert upstream.gate_reached.wait(2)
    upstream.release()
    assert [c.choices[0].finish_reason for c in chunks] == ["stop"]


def test_unknown_path_is_a_recorded_404(upstream: FakeUpstream) -> None:
    answer = httpx.post(f"{upstream.base_url}/embeddings", json={"input": "x"})
    assert answer.status_code == 404
    assert "unexpected request" in answer.json()["error"]["message"]
    assert [r.path for r in upstream.unexpected] == ["/v1/embeddings"]


async def test_wait_for_request_from_another_thread(upstream: FakeUpstream) -> None:
    upstream.script(hold("x"))
    async with AsyncOpenAI(base_url=upstream.base_url, api_key="k", max_retries=0) as client:
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        received = await asyncio.to_thread(upstream.wait_for_request, 1, 2.0)
        assert (received.api, received.stream) == ("chat", True)
        await stream.close()
    with pytest.raises(AssertionError, match="waited for 2"):
        upstream.wait_for_request(2, timeout=0.01)


def test_a_context_limit_answers_like_openai(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.context_limit = 100
    upstream.script(text("short"))
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x" * 101}])
    assert caught.value.code == "context_length_exceeded"
    assert "maximum context length" in caught.value.message
    assert upstream.pending == 1  # a refusal takes no scenario
    answer = client.chat.completions.create(model="m", messages=MESSAGES)
    assert answer.choices[0].message.content == "short"
    assert len(upstream.refused) == 1


def test_a_default_responder_answers_what_is_not_scripted(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.default = responder(lambda request: text(f"{len(request.body['messages'])} seen"))
    answer = client.chat.completions.create(model="m", messages=MESSAGES)
    assert answer.choices[0].message.content == "1 seen"
    upstream.assert_used_up()

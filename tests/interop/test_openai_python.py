"""openai-python against Iris on the first-run config: the calls its users make every day."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai import NOT_GIVEN, OpenAI
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputParam, ResponseStreamEvent
from pydantic import BaseModel

from tests.api.conftest import IrisServer
from tests.fakes.upstream import FakeUpstream, gated, hold, text, tool_call, tool_calls
from tests.interop.conftest import WEATHER_PARAMETERS, upstream_bodies

pytestmark = pytest.mark.timeout(30)

CHAT_WEATHER: Any = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Weather", "parameters": WEATHER_PARAMETERS},
}
RESPONSES_WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather",
    "parameters": WEATHER_PARAMETERS,
}


class Weather(BaseModel):
    city: str
    celsius: int


WEATHER_JSON = '{"city": "Paris", "celsius": 21}'


@pytest.fixture
def client(iris: IrisServer) -> Iterator[OpenAI]:
    with OpenAI(base_url=iris.base_url, api_key="unused", max_retries=0, timeout=10) as c:
        yield c


@pytest.mark.parametrize("stream", [NOT_GIVEN, False], ids=["stream-omitted", "stream-false"])
def test_chat_create_without_stream_returns_one_completion(
    upstream: FakeUpstream, client: OpenAI, stream: Any
) -> None:
    upstream.script(text("Hel", "lo"))
    completion = client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=stream
    )
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == "Hello"
    assert completion.choices[0].finish_reason == "stop"


def test_chat_create_with_stream_true_streams_chunks(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(text("Hel", "lo"))
    stream = client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    deltas = [c.choices[0].delta.content or "" for c in stream if c.choices]
    assert "".join(deltas) == "Hello"
    assert len([d for d in deltas if d]) == 2


@pytest.mark.parametrize("stream", [NOT_GIVEN, False], ids=["stream-omitted", "stream-false"])
def test_responses_create_without_stream_returns_one_response(
    upstream: FakeUpstream, client: OpenAI, stream: Any
) -> None:
    upstream.script(text("Hel", "lo"))
    response = client.responses.create(model="fake-model", input="hi", stream=stream)
    assert response.object == "response"
    assert response.status == "completed"
    assert response.output_text == "Hello"


def test_responses_create_with_stream_true_streams_events(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(text("Hel", "lo"))
    events = list(client.responses.create(model="fake-model", input="hi", stream=True))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert deltas == ["Hel", "lo"]
    assert events[-1].type == "response.completed"


def test_chat_completions_parse_reaches_the_model_and_parses(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(text(WEATHER_JSON))
    completion = client.chat.completions.parse(
        model="fake-model",
        messages=[{"role": "user", "content": "Weather in Paris as JSON"}],
        response_format=Weather,
    )
    assert completion.choices[0].message.parsed == Weather(city="Paris", celsius=21)
    sent = upstream_bodies(upstream)[0]["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["strict"] is True
    assert set(sent["json_schema"]["schema"]["properties"]) == {"city", "celsius"}


def test_responses_parse_reaches_the_model_and_parses(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(text(WEATHER_JSON))
    response = client.responses.parse(
        model="fake-model", input="Weather in Paris as JSON", text_format=Weather
    )
    assert response.output_parsed == Weather(city="Paris", celsius=21)
    # The chat-completions provider gets the format in its own name.
    sent = upstream_bodies(upstream)[0]["response_format"]
    assert sent["type"] == "json_schema"
    assert set(sent["json_schema"]["schema"]["properties"]) == {"city", "celsius"}
    assert response.text.format is not None and response.text.format.type == "json_schema"


def test_chat_tool_loop_call_output_answer(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(
        tool_call("get_weather", ['{"city":', '"Paris"}'], call_id="call_w"),
        text("Sunny, 21 °C."),
    )
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Weather in Paris?"}]
    first = client.chat.completions.create(
        model="fake-model", messages=messages, tools=[CHAT_WEATHER]
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert len(calls) == 1 and calls[0].type == "function"
    assert calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments) == {"city": "Paris"}

    messages.append(choice.message.model_dump(exclude_none=True))  # type: ignore[arg-type]
    messages.append({"role": "tool", "tool_call_id": calls[0].id, "content": "sunny, 21"})
    final = client.chat.completions.create(
        model="fake-model", messages=messages, tools=[CHAT_WEATHER]
    )
    assert final.choices[0].message.content == "Sunny, 21 °C."
    sent = upstream_bodies(upstream)[1]["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_w", "content": "sunny, 21"}
    assert sent[-2]["tool_calls"][0]["id"] == "call_w"


def test_responses_tool_loop_with_previous_response_id(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(
        tool_call("get_weather", ['{"city":', '"Paris"}'], call_id="call_w"),
        text("Sunny, 21 °C."),
    )
    first = client.responses.create(
        model="fake-model", input="Weather in Paris?", tools=[RESPONSES_WEATHER]
    )
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1
    assert calls[0].name == "get_weather"
    assert json.loads(calls[0].arguments) == {"city": "Paris"}

    outputs: ResponseInputParam = [
        {"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny, 21"}
    ]
    final = client.responses.create(
        model="fake-model",
        input=outputs,
        previous_response_id=first.id,
        tools=[RESPONSES_WEATHER],
    )
    assert final.output_text == "Sunny, 21 °C."
    assert final.previous_response_id == first.id
    sent = upstream_bodies(upstream)[1]["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_w", "content": "sunny, 21"}


def test_previous_response_id_carries_the_conversation(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(text("Hi Ada."), text("You are Ada."))
    first = client.responses.create(model="fake-model", input="My name is Ada.")
    second = client.responses.create(
        model="fake-model", input="What is my name?", previous_response_id=first.id
    )
    assert second.output_text == "You are Ada."
    contents = [m.get("content") for m in upstream_bodies(upstream)[1]["messages"]]
    assert contents[-3:] == ["My name is Ada.", "Hi Ada.", "What is my name?"]


def _sequence(events: list[ResponseStreamEvent]) -> list[int]:
    return [event.sequence_number for event in events]


def test_background_stream_resumes_after_a_dropped_connection(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(gated("Hel", "lo", after=1))
    before: list[ResponseStreamEvent] = []
    stream = client.responses.create(model="fake-model", input="hi", background=True, stream=True)
    for event in stream:
        before.append(event)
        if event.type == "response.output_text.delta":
            break
    stream.close()  # the client's connection drops mid-turn
    created = before[0]
    assert created.type == "response.created"
    assert created.response.background is True
    response_id = created.response.id

    # Resume from just after response.created while the model is still held: the stored
    # events come back, then the live ones, with no gap and no duplicate.
    resumed = client.responses.retrieve(
        response_id, stream=True, starting_after=created.sequence_number
    )
    after: list[ResponseStreamEvent] = []
    for event in resumed:
        after.append(event)
        if event.type == "response.output_text.delta":
            break
    assert _sequence(after) == _sequence(before)[1:]
    upstream.release()
    after.extend(resumed)
    numbers = _sequence(after)
    assert numbers == list(range(created.sequence_number + 1, numbers[-1] + 1))
    deltas = [e.delta for e in after if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "Hello"
    assert after[-1].type == "response.completed"
    assert not upstream.disconnected.is_set(), "the dropped client stopped a background turn"

    stored = client.responses.retrieve(response_id)
    assert stored.status == "completed"
    assert stored.output_text == "Hello"


def test_background_response_returns_at_once_and_cancels(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(hold("Hel"))
    queued = client.responses.create(model="fake-model", input="hi", background=True)
    assert queued.status in ("queued", "in_progress")
    assert queued.background is True
    assert upstream.gate_reached.wait(5), "the background turn never reached the model"

    cancelled = client.responses.cancel(queued.id)
    assert cancelled.status == "cancelled"
    assert upstream.disconnected.wait(5), "cancel left the upstream request running"
    assert client.responses.retrieve(queued.id).status == "cancelled"


def test_chat_tool_call_streams_its_arguments_as_they_form(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    # The upstream sends the call's head and first fragment, then waits: the client must see
    # the call before the model has finished it (a coding agent writing a long file).
    upstream.script(tool_call("get_weather", ['{"city": ', '"Paris"}'], gate_after=1))
    stream = client.chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[CHAT_WEATHER],
        stream=True,
    )
    seen: list[Any] = []
    for chunk in stream:
        calls = chunk.choices[0].delta.tool_calls if chunk.choices else None
        if calls:
            seen.extend(calls)
            if calls[0].function and calls[0].function.arguments:
                break
    assert not upstream.finished.is_set(), "the call waited for the upstream to finish"
    head = seen[0]
    assert (head.index, head.id, head.function.name) == (0, "call_1", "get_weather")
    assert "".join(c.function.arguments or "" for c in seen) == '{"city": '
    upstream.release()
    rest = list(stream)
    later = [c for chunk in rest if chunk.choices for c in chunk.choices[0].delta.tool_calls or ()]
    # Never the id or name again (the SDK's accumulator would concatenate them).
    assert all(c.id is None and (c.function is None or c.function.name is None) for c in later)
    arguments = "".join(c.function.arguments or "" for c in [*seen, *later] if c.function)
    assert json.loads(arguments) == {"city": "Paris"}
    assert rest[-1].choices[0].finish_reason == "tool_calls"


def test_chat_stream_helper_accumulates_a_streamed_call(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(
        tool_calls(
            [("get_weather", ['{"ci', 'ty": "Paris"}']), ("get_weather", ['{"city"', ': "Oslo"}'])]
        )
    )
    with client.chat.completions.stream(
        model="fake-model",
        messages=[{"role": "user", "content": "Weather in Paris and Oslo?"}],
        tools=[CHAT_WEATHER],
    ) as stream:
        fragments = [
            event.arguments_delta
            for event in stream
            if event.type == "tool_calls.function.arguments.delta" and event.arguments_delta
        ]
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls or []
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [  # type: ignore[union-attr]
        ("call_1", "get_weather", {"city": "Paris"}),
        ("call_2", "get_weather", {"city": "Oslo"}),
    ]
    assert fragments == ['{"ci', 'ty": "Paris"}', '{"city"', ': "Oslo"}']


def test_responses_tool_call_streams_its_arguments_as_they_form(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(
        tool_call("get_weather", ['{"city": ', '"Paris"}'], content="Let me look.", gate_after=2)
    )
    with client.responses.stream(
        model="fake-model", input="Weather in Paris?", tools=[RESPONSES_WEATHER]
    ) as stream:
        before: list[ResponseStreamEvent] = []
        for event in stream:
            before.append(event)
            if event.type == "response.function_call_arguments.delta":
                break
        assert not upstream.finished.is_set(), "the call waited for the upstream to finish"
        upstream.release()
        after = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in [*before, *after]]
    added = next(
        e
        for e in before
        if e.type == "response.output_item.added" and e.item.type == "function_call"
    )
    assert added.item.type == "function_call"
    assert (added.item.call_id, added.item.name, added.item.arguments) == (
        "call_1",
        "get_weather",
        "",
    )
    # The commentary message is done before the call's item is added.
    assert kinds.index("response.output_text.done") < kinds.index(
        "response.function_call_arguments.delta"
    )
    deltas = [
        e.delta for e in [*before, *after] if e.type == "response.function_call_arguments.delta"
    ]
    assert deltas == ['{"city": ', '"Paris"}']
    assert kinds[-3:] == [
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    call = final.output[-1]
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "Paris"}
    assert [item.type for item in final.output] == ["message", "function_call"]

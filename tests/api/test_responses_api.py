"""POST /v1/responses end to end: the openai client's ``responses.stream()`` helper (which
validates event order) and plain calls against Iris on a real socket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import NotFoundError, OpenAI

from tests.api.conftest import IrisServer, StartIris
from tests.api.openresponses import valid_event, valid_response
from tests.fakes.upstream import (
    FakeUpstream,
    gated,
    reasoning,
    responses_text,
    stream_error,
    text,
    tool_call,
)

pytestmark = pytest.mark.timeout(30)

WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}

# What the Open Responses specification requires on every response object.
REQUIRED = {
    "id", "object", "created_at", "completed_at", "status", "incomplete_details", "model",
    "previous_response_id", "instructions", "output", "error", "tools", "tool_choice",
    "truncation", "parallel_tool_calls", "text", "top_p", "presence_penalty",
    "frequency_penalty", "top_logprobs", "temperature", "reasoning", "user", "usage",
    "max_output_tokens", "max_tool_calls", "store", "background", "service_tier", "metadata",
    "safety_identifier", "prompt_cache_key",
}  # fmt: skip


@pytest.fixture
def server(iris_server: StartIris) -> IrisServer:
    return iris_server()


@pytest.fixture
def client(server: IrisServer) -> Iterator[OpenAI]:
    with OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10) as c:
        yield c


def raw_events(server: IrisServer, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    with httpx.Client(timeout=10) as http:
        response = http.post(f"{server.base_url}/responses", json={**body, "stream": True})
    assert response.status_code == 200
    frames = response.text.split("\n\n")
    assert frames[-2:] == ["data: [DONE]", ""]
    events: list[tuple[str, dict[str, Any]]] = []
    for frame in frames[:-2]:
        name, data = frame.split("\n")
        payload = json.loads(data.removeprefix("data: "))
        valid_event(payload)
        events.append((name.removeprefix("event: "), payload))
    return events


def test_stream_helper_accepts_the_event_sequence(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(gated("Hel", "lo", after=1))
    with client.responses.stream(model="fake-model", input="hi") as stream:
        events = iter(stream)
        types: list[str] = []
        for event in events:
            types.append(event.type)
            if event.type == "response.output_text.delta":
                break
        # Relayed while the upstream is still held at its gate.
        assert not upstream.finished.is_set()
        upstream.release()
        types.extend(event.type for event in events)
        final = stream.get_final_response()
    valid_response(final)
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert final.output_text == "Hello"
    assert final.status == "completed"
    assert final.usage is not None and final.usage.total_tokens == 15
    assert set(final.to_dict(exclude_unset=False)) >= REQUIRED


def test_raw_events_are_named_after_their_type_with_monotonic_sequence(
    upstream: FakeUpstream, server: IrisServer
) -> None:
    upstream.script(text("a", "b"))
    events = raw_events(server, {"model": "fake-model", "input": "hi"})
    assert all(name == data["type"] for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    deltas = [data for name, data in events if name == "response.output_text.delta"]
    assert [d["delta"] for d in deltas] == ["a", "b"]
    assert all(d["logprobs"] == [] for d in deltas)
    completed = events[-1][1]["response"]
    assert set(completed) >= REQUIRED
    assert completed["output"][0]["content"][0]["text"] == "ab"


def test_non_streamed_response_and_retrieve(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(text("Hello", " there", usage=(4, 2)))
    response = client.responses.create(
        model="fake-model",
        input=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        ],
        metadata={"k": "v"},
    )
    valid_response(response)
    assert response.output_text == "Hello there"
    assert response.status == "completed"
    assert response.metadata == {"k": "v"}
    assert response.usage is not None and response.usage.input_tokens == 4
    assert set(response.to_dict(exclude_unset=False)) >= REQUIRED
    sent = upstream.requests[0].body["messages"]
    assert sent[-2:] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    again = client.responses.retrieve(response.id)
    valid_response(again)
    assert again.output_text == "Hello there"
    with pytest.raises(NotFoundError):
        client.responses.retrieve("resp_missing")


def test_previous_response_id_continues_the_conversation(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(text("Nice to meet you, Ada."), text("You are Ada."))
    first = client.responses.create(model="fake-model", input="I am Ada", instructions="be nice")
    second = client.responses.create(
        model="fake-model", input="who am I?", previous_response_id=first.id
    )
    valid_response(second)
    assert second.output_text == "You are Ada."
    assert second.previous_response_id == first.id
    sent = [(m["role"], m["content"]) for m in upstream.requests[1].body["messages"]]
    assert sent == [
        ("user", "I am Ada"),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "who am I?"),
    ], "instructions are not carried over; the conversation is"


def test_input_image_parts_reach_the_model(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(text("A cat."))
    client.responses.create(
        model="fake-model",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what is this?"},
                    {
                        "type": "input_image",
                        "image_url": "data:image/png;base64,AAAA",
                        "detail": "auto",
                    },
                ],
            }
        ],
    )
    content = upstream.requests[0].body["messages"][-1]["content"]
    assert content == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "auto"}},
    ]


def test_raw_reasoning_is_the_reasoning_items_content(
    upstream: FakeUpstream, server: IrisServer, client: OpenAI
) -> None:
    """A chat-completions provider's ``reasoning_content`` is the model's raw reasoning: it
    is the item's ``content``; there is no summary, since the provider gave none."""
    upstream.script(reasoning(["Think", "ing."], ["Done."]), reasoning(["Hm."], ["Ok."]))
    events = raw_events(server, {"model": "fake-model", "input": "hi"})
    names = [name for name, _ in events]
    raw = [d["delta"] for n, d in events if n == "response.reasoning_text.delta"]
    assert "".join(raw) == "Thinking."
    assert names.index("response.reasoning_text.delta") < names.index("response.output_text.delta")
    assert not any(name.startswith("response.reasoning_summary") for name in names)
    output = events[-1][1]["response"]["output"]
    assert [item["type"] for item in output] == ["reasoning", "message"]
    assert output[0]["content"] == [{"type": "reasoning_text", "text": "Thinking."}]
    assert output[0]["summary"] == []

    plain = client.responses.create(model="fake-model", input="hi")  # not streamed
    valid_response(plain)
    item = plain.output[0]
    assert item.type == "reasoning" and item.summary == []
    assert item.content is not None and [c.text for c in item.content] == ["Hm."]


def test_a_provider_summary_stays_a_summary(upstream: FakeUpstream, iris_server: StartIris) -> None:
    """On a Responses-API provider, reasoning the provider summarised is the summary."""
    server = iris_server(model={"provider": "responses"})
    upstream.script(
        responses_text("Done.", reasoning=["Brief ", "plan."]),
        responses_text("Again.", reasoning=["Same plan."]),
    )
    events = raw_events(server, {"model": "fake-model", "input": "hi"})
    summary = [d["delta"] for n, d in events if n == "response.reasoning_summary_text.delta"]
    assert "".join(summary) == "Brief plan."
    assert not any(n == "response.reasoning_text.delta" for n, _ in events)
    output = events[-1][1]["response"]["output"]
    assert output[0]["summary"] == [{"type": "summary_text", "text": "Brief plan."}]
    assert output[0]["content"] == []

    with OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10) as client:
        plain = client.responses.create(model="fake-model", input="hi")  # upstream not streamed
    valid_response(plain)
    item = plain.output[0]
    assert item.type == "reasoning" and not item.content
    assert [part.text for part in item.summary] == ["Same plan."]


def test_client_tools_are_function_call_items_and_outputs_continue(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(
        tool_call("get_weather", ['{"city": ', '"Paris"}'], call_id="call_p"),
        text("Sunny."),
    )
    arg_deltas: list[str] = []
    with client.responses.stream(model="fake-model", input="weather?", tools=[WEATHER]) as stream:
        for event in stream:
            if event.type == "response.function_call_arguments.delta":
                arg_deltas.append(event.delta)
        final = stream.get_final_response()
    calls = [item for item in final.output if item.type == "function_call"]
    assert len(calls) == 1
    call = calls[0]
    assert (call.call_id, call.name, call.arguments) == (
        "call_p",
        "get_weather",
        '{"city": "Paris"}',
    )
    assert "".join(arg_deltas) == '{"city": "Paris"}'
    offered = [t["function"]["name"] for t in upstream.requests[0].body["tools"]]
    assert offered == ["get_weather"]

    valid_response(final)
    answer = client.responses.create(
        model="fake-model",
        previous_response_id=final.id,
        input=[{"type": "function_call_output", "call_id": "call_p", "output": "sunny, 24C"}],
        tools=[WEATHER],
    )
    assert answer.output_text == "Sunny."
    sent = upstream.requests[1].body["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_p", "content": "sunny, 24C"}
    assert sent[-2]["tool_calls"][0]["id"] == "call_p"


def test_stateless_function_call_round_trip(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(text("Done."))
    client.responses.create(
        model="fake-model",
        input=[
            {"role": "user", "content": "weather?"},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "get_weather",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "c1", "output": "rain"},
        ],
        tools=[WEATHER],
    )
    sent = upstream.requests[0].body["messages"]
    assert sent[-2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert sent[-1] == {"role": "tool", "tool_call_id": "c1", "content": "rain"}


def test_failure_after_the_header_is_error_then_response_failed(
    upstream: FakeUpstream, server: IrisServer, client: OpenAI
) -> None:
    upstream.script(stream_error("Hel", message="model exploded"), text("fine"))
    events = raw_events(server, {"model": "fake-model", "input": "hi"})
    names = [name for name, _ in events]
    assert names[-2:] == ["error", "response.failed"]
    assert "model exploded" in events[-2][1]["message"]
    failed = events[-1][1]["response"]
    assert failed["status"] == "failed" and "model exploded" in failed["error"]["message"]
    assert client.responses.create(model="fake-model", input="hi").output_text == "fine"


def test_agent_tools_run_inside_and_commentary_is_its_own_message(
    upstream: FakeUpstream, iris_server: StartIris, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("the secret is 42")
    # Iris's own tools are offered to API callers only behind a key.
    server = iris_server(
        tools={"enabled": ["read_file"], "terminal": {"cwd": str(tmp_path)}},
        platforms={"api_server": {"api_key": "sk-iris"}},
    )
    upstream.script(
        tool_call("read_file", ['{"path": "notes.txt"}'], content="Let me look."),
        text("It is 42."),
    )
    with (
        OpenAI(base_url=server.base_url, api_key="sk-iris", max_retries=0, timeout=10) as client,
        client.responses.stream(model="iris-agent", input="secret?") as stream,
    ):
        final = stream.get_final_response()
    valid_response(final)
    messages = [item for item in final.output if item.type == "message"]
    assert [m.phase for m in messages] == ["commentary", None]
    assert final.output_text == "Let me look.It is 42."  # the SDK joins message texts as-is
    # The tool run shows as an mcp_call between the two (tests/api/test_tool_runs.py).
    kinds = [item.type for item in final.output]
    assert kinds == ["mcp_list_tools", "message", "mcp_call", "message"]
    assert "the secret is 42" in upstream.requests[1].body["messages"][-1]["content"]


def test_store_false_is_not_kept(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(text("Forget me."))
    response = client.responses.create(model="fake-model", input="hi", store=False)
    assert response.store is False
    with pytest.raises(NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(NotFoundError):
        client.responses.create(model="fake-model", input="again", previous_response_id=response.id)


def test_instructions_reach_the_model_as_a_system_message(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(text("Ahoy."))
    response = client.responses.create(
        model="fake-model", input="hi", instructions="talk like a pirate"
    )
    assert response.instructions == "talk like a pirate"
    sent = upstream.requests[0].body["messages"]
    assert sent[0]["role"] == "system" and "talk like a pirate" in sent[0]["content"]


# -- item_reference ----------------------------------------------------------------------


def test_a_second_turn_replays_the_first_as_item_references(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(
        reasoning(["Hm."], ["Hi Ada."]),
        tool_call("get_weather", ['{"city": "Paris"}'], call_id="call_w", content="Checking."),
        text("Sunny, Ada."),
    )
    first = client.responses.create(model="fake-model", input="I am Ada")
    valid_response(first)
    assert [item.type for item in first.output] == ["reasoning", "message"]
    assert [(item.id or "")[:3] for item in first.output] == ["rs_", "msg"]
    refs: Any = [{"type": "item_reference", "id": item.id} for item in first.output]
    second = client.responses.create(
        model="fake-model",
        input=[
            {"role": "user", "content": "I am Ada"},
            *refs,
            {"role": "user", "content": "weather in Paris?"},
        ],
        tools=[WEATHER],
    )
    valid_response(second)
    sent = [(m["role"], m.get("content")) for m in upstream.requests[1].body["messages"]]
    assert sent == [
        ("user", "I am Ada"),
        ("assistant", "Hi Ada."),  # the reasoning item is dropped, as inline
        ("user", "weather in Paris?"),
    ]

    # A tool loop: the call and the text before it come back as references, the output inline.
    call = next(item for item in second.output if item.type == "function_call")
    assert (call.id or "").startswith("fc_")
    replay: Any = [{"type": "item_reference", "id": item.id} for item in second.output]
    third = client.responses.create(
        model="fake-model",
        input=[  # references in the first position
            *replay,
            {"type": "function_call_output", "call_id": "call_w", "output": "sunny"},
        ],
        tools=[WEATHER],
    )
    assert third.output_text == "Sunny, Ada."
    sent = upstream.requests[2].body["messages"]
    assert sent[-2]["role"] == "assistant" and sent[-2]["content"] == "Checking."
    assert sent[-2]["tool_calls"][0]["id"] == "call_w"
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_w", "content": "sunny"}


def test_an_unknown_item_reference_is_a_404_naming_it(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    with pytest.raises(NotFoundError) as caught:
        client.responses.create(
            model="fake-model",
            input=[{"role": "user", "content": "hi"}, {"type": "item_reference", "id": "msg_nope"}],
        )
    error: Any = caught.value.body
    assert error["code"] == "item_not_found" and "msg_nope" in error["message"]
    assert error["param"] == "input[1]"
    assert upstream.requests == []


def test_a_reference_may_leave_out_its_type(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(text("Hi Ada."), text("Ada."))
    first = client.responses.create(model="fake-model", input="I am Ada")
    bare: Any = [{"role": "user", "content": "I am Ada"}, {"id": first.output[0].id}]
    client.responses.create(model="fake-model", input=[*bare, {"role": "user", "content": "?"}])
    sent = [(m["role"], m["content"]) for m in upstream.requests[1].body["messages"]]
    assert sent == [("user", "I am Ada"), ("assistant", "Hi Ada."), ("user", "?")]


def test_items_of_a_store_false_response_cannot_be_referenced(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(text("Forget me."))
    response = client.responses.create(model="fake-model", input="hi", store=False)
    reference: Any = {"type": "item_reference", "id": response.output[0].id}
    with pytest.raises(NotFoundError):
        client.responses.create(model="fake-model", input=[reference])


def test_inline_items_with_ids_still_work(upstream: FakeUpstream, client: OpenAI) -> None:
    """The AI SDK sends its own history inline, each item with the id it was given."""
    upstream.script(text("Done."))
    client.responses.create(
        model="fake-model",
        input=[
            {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
            {"type": "reasoning", "id": "rs_x", "summary": []},
            {
                "type": "message",
                "id": "msg_x",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
            },
            {
                "type": "function_call",
                "id": "fc_x",
                "call_id": "c1",
                "name": "get_weather",
                "arguments": "{}",
            },
            {"type": "function_call_output", "id": "fco_x", "call_id": "c1", "output": "rain"},
        ],
        tools=[WEATHER],
    )
    sent = upstream.requests[0].body["messages"]
    assert sent[-2]["content"] == "Checking."
    assert sent[-2]["tool_calls"][0]["id"] == "c1"
    assert sent[-1] == {"role": "tool", "tool_call_id": "c1", "content": "rain"}

"""POST /v1/chat/completions end to end: the official openai client against Iris on a real
socket, Iris against the scripted fake upstream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import APIError, OpenAI

from tests.api.conftest import IrisServer, StartIris
from tests.fakes.upstream import (
    FakeUpstream,
    gated,
    hold,
    reasoning,
    stream_error,
    text,
    tool_call,
)

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "hi"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def client_for(server: IrisServer, api_key: str = "unused") -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key=api_key, max_retries=0, timeout=10)


@pytest.fixture
def server(iris_server: StartIris) -> IrisServer:
    return iris_server()


@pytest.fixture
def client(server: IrisServer) -> Iterator[OpenAI]:
    with client_for(server) as c:
        yield c


def test_first_delta_arrives_before_the_upstream_finished(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(gated("Hel", "lo", " world", after=1))
    stream = client.chat.completions.create(model="fake-model", messages=USER, stream=True)
    chunks = iter(stream)
    first = next(chunks)
    assert first.choices[0].delta.role == "assistant"
    delta = next(chunks)
    # The upstream is still held at its gate: this text was relayed, not buffered.
    assert delta.choices[0].delta.content == "Hel"
    assert not upstream.finished.is_set()
    upstream.release()
    rest = list(chunks)
    content = "Hel" + "".join(c.choices[0].delta.content or "" for c in rest)
    assert content == "Hello world"
    assert all(c.choices[0].delta.role is None for c in rest), "role is sent once"
    assert rest[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in rest), "no usage chunk unless asked"


def test_include_usage_adds_a_usage_chunk_with_empty_choices(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(text("Hi", " there", usage=(12, 7)))
    chunks = list(
        client.chat.completions.create(
            model="fake-model",
            messages=USER,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (12, 7)
    assert chunks[-2].choices[0].finish_reason == "stop"


def test_non_streamed_completion(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(text("Hello", " world", usage=(3, 2)))
    completion = client.chat.completions.create(model="fake-model", messages=USER)
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == "Hello world"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens == 5


def test_reasoning_streams_as_reasoning_content(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(reasoning(["Let me ", "think."], ["The answer", " is 4."]))
    chunks = list(client.chat.completions.create(model="fake-model", messages=USER, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    thought = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    answer = "".join(d.content or "" for d in deltas)
    assert thought == "Let me think."
    assert answer == "The answer is 4."
    assert "think" not in answer


def test_agent_tools_run_inside_and_the_client_sees_what_the_agent_says(
    upstream: FakeUpstream, iris_server: StartIris, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("the secret is 42")
    # Iris's own tools are offered to API callers only behind a key.
    server = iris_server(
        tools={"enabled": ["read_file"], "terminal": {"cwd": str(tmp_path)}},
        platforms={"api_server": {"api_key": "sk-iris"}},
    )
    upstream.script(
        tool_call("read_file", ['{"path": ', '"notes.txt"}'], content="Let me look."),
        text("The secret", " is 42."),
    )
    with client_for(server, "sk-iris") as client:
        chunks = list(
            client.chat.completions.create(model="iris-agent", messages=USER, stream=True)
        )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "Let me look.\n\nThe secret is 42."
    assert all(c.choices[0].delta.tool_calls is None for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason == "stop"
    # The tool result went back to the model inside Iris.
    second = upstream.requests[1].body["messages"]
    assert second[-1]["role"] == "tool" and "the secret is 42" in second[-1]["content"]


def test_client_tools_go_back_to_the_client_and_its_results_continue(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(
        tool_call("get_weather", ['{"city": ', '"Paris"}'], call_id="call_w1"),
        text("Sunny in Paris."),
    )
    chunks = list(
        client.chat.completions.create(
            model="fake-model",
            messages=USER,
            tools=[WEATHER],
            stream=True,  # type: ignore[list-item]
        )
    )
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] += call.id or ""
            entry["name"] += (call.function.name or "") if call.function else ""
            entry["arguments"] += (call.function.arguments or "") if call.function else ""
    assert calls == {0: {"id": "call_w1", "name": "get_weather", "arguments": '{"city": "Paris"}'}}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    # Only the client's tool was offered to the model: Iris's own never mix in.
    offered = [t["function"]["name"] for t in upstream.requests[0].body["tools"]]
    assert offered == ["get_weather"]

    follow_up: list[Any] = [
        *USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 24C"},
    ]
    answer = client.chat.completions.create(
        model="fake-model",
        messages=follow_up,
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert answer.choices[0].message.content == "Sunny in Paris."
    sent = upstream.requests[1].body["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 24C"}
    assert sent[-2]["tool_calls"][0]["id"] == "call_w1"


def test_non_streamed_client_tool_call(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(tool_call("get_weather", ['{"city": "Oslo"}'], call_id="call_o"))
    completion = client.chat.completions.create(
        model="fake-model",
        messages=USER,
        tools=[WEATHER],  # type: ignore[list-item]
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == (  # type: ignore[union-attr]
        "call_o",
        "get_weather",
        '{"city": "Oslo"}',
    )


def test_upstream_failure_after_the_header_is_in_band_then_done(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(stream_error("Hel", message="model exploded"), text("fine"))
    seen = ""
    with pytest.raises(APIError, match="model exploded"):
        for chunk in client.chat.completions.create(model="fake-model", messages=USER, stream=True):
            seen += chunk.choices[0].delta.content or "" if chunk.choices else ""
    assert seen == "Hel"
    # The server keeps serving.
    again = client.chat.completions.create(model="fake-model", messages=USER)
    assert again.choices[0].message.content == "fine"


def test_raw_stream_is_plain_data_lines_ending_with_done(
    upstream: FakeUpstream, server: IrisServer
) -> None:
    upstream.script(text("a", "b"))
    body = {"model": "fake-model", "messages": USER, "stream": True}
    with httpx.Client(timeout=10) as http:
        response = http.post(f"{server.base_url}/chat/completions", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = response.text.split("\n\n")
    assert frames[-2:] == ["data: [DONE]", ""]
    assert all(frame.startswith("data: ") for frame in frames[:-1]), "no event: lines"
    chunks = [json.loads(frame[6:]) for frame in frames[:-2]]
    assert len({c["id"] for c in chunks}) == 1
    assert [c["choices"][0]["delta"].get("role") for c in chunks].count("assistant") == 1


def test_client_disconnect_closes_the_upstream_request(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(hold("Hel"))
    stream = client.chat.completions.create(model="fake-model", messages=USER, stream=True)
    chunks = iter(stream)
    next(chunks)  # role
    assert next(chunks).choices[0].delta.content == "Hel"
    stream.close()
    assert upstream.disconnected.wait(2.0), "the upstream request stayed open"  # 1 s + CI slack

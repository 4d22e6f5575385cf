"""Legacy function calling (``functions`` / ``function_call``) works as OpenAI maps it onto
tools, answers in the legacy shape, and a request that offers any function or tool of its own
never gets Iris's own tools (issue 26: ``terminal`` ran for a client that offered only its
``functions``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import BadRequestError, OpenAI

from tests.api.conftest import StartIris
from tests.conftest import anywhere
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(30)

KEY = "sk-iris-test"
WEATHER: Any = {
    "name": "get_weather",
    "description": "Weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
ASK = [{"role": "user", "content": "Weather in Paris?"}]


def offered(upstream: FakeUpstream, n: int = 0) -> list[str]:
    return [t["function"]["name"] for t in upstream.requests[n].body.get("tools") or []]


def test_functions_only_never_offer_or_run_the_agent_tools(
    upstream: FakeUpstream, iris_server: StartIris, tmp_path: Path
) -> None:
    server = iris_server(
        platforms={"api_server": {"api_key": KEY}}, tools={"terminal": {"cwd": str(tmp_path)}}
    )
    command = '{"command": "touch pwned"}'
    upstream.script(tool_call("terminal", [command]))
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as client:
        reply = client.chat.completions.create(
            model="fake-model",
            messages=ASK,  # type: ignore[arg-type]
            functions=[WEATHER],
        )
    assert offered(upstream) == ["get_weather"]
    assert not anywhere(tmp_path, "pwned")
    # The model's call is the client's to run (or refuse), never Iris's.
    assert reply.choices[0].finish_reason == "function_call"
    assert reply.choices[0].message.function_call is not None
    assert reply.choices[0].message.function_call.name == "terminal"


@pytest.mark.parametrize("tools", [[], None], ids=["tools-empty", "functions-empty"])
def test_an_empty_tool_list_is_still_the_client_saying_which_tools(
    upstream: FakeUpstream, iris_server: StartIris, tools: list[Any] | None
) -> None:
    server = iris_server(platforms={"api_server": {"api_key": KEY}})
    upstream.script(text("no tools"))
    body: dict[str, Any] = {"tools": []} if tools is not None else {"functions": []}
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as client:
        reply = client.chat.completions.create(
            model="fake-model",
            messages=ASK,  # type: ignore[arg-type]
            extra_body=body,
        )
    assert offered(upstream) == []
    assert reply.choices[0].message.content == "no tools"


def test_legacy_round_trip_with_the_sdk(upstream: FakeUpstream, iris_server: StartIris) -> None:
    server = iris_server()
    upstream.script(
        tool_call("get_weather", ['{"city": ', '"Paris"}'], call_id="call_up"), text("Sunny.")
    )
    with OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10) as client:
        first = client.chat.completions.create(
            model="fake-model",
            messages=ASK,  # type: ignore[arg-type]
            functions=[WEATHER],
            function_call={"name": "get_weather"},
        )
        message = first.choices[0].message
        assert message.tool_calls is None
        assert message.function_call is not None
        assert json.loads(message.function_call.arguments) == {"city": "Paris"}
        history: Any = [
            *ASK,
            {
                "role": "assistant",
                "content": None,
                "function_call": message.function_call.model_dump(),
            },
            {"role": "function", "name": "get_weather", "content": "sunny, 21"},
        ]
        second = client.chat.completions.create(
            model="fake-model", messages=history, functions=[WEATHER]
        )
    assert second.choices[0].message.content == "Sunny."
    assert upstream.requests[0].body["tool_choice"] == {
        "type": "function",
        "function": {"name": "get_weather"},
    }
    sent = upstream.requests[1].body["messages"]
    call = sent[-2]["tool_calls"][0]
    assert sent[-2]["role"] == "assistant" and call["function"]["name"] == "get_weather"
    assert sent[-1] == {"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21"}


def test_legacy_streaming_sends_function_call_deltas(
    upstream: FakeUpstream, iris_server: StartIris
) -> None:
    server = iris_server()
    upstream.script(tool_call("get_weather", ['{"city": ', '"Paris"}']))
    with OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10) as client:
        chunks = list(
            client.chat.completions.create(
                model="fake-model",
                messages=ASK,  # type: ignore[arg-type]
                functions=[WEATHER],
                stream=True,
            )
        )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    calls = [d.function_call for d in deltas if d.function_call is not None]
    assert [c.name for c in calls] == ["get_weather", None, None]
    assert "".join(c.arguments or "" for c in calls) == '{"city": "Paris"}'
    assert all(d.tool_calls is None for d in deltas)
    assert chunks[-1].choices[0].finish_reason == "function_call"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (
            {"functions": [WEATHER], "tools": [{"type": "function", "function": WEATHER}]},
            "functions",
        ),
        ({"functions": [WEATHER], "function_call": "auto", "tool_choice": "auto"}, "function_call"),
        ({"function_call": "auto"}, "function_call"),
        ({"functions": [WEATHER], "function_call": "sometimes"}, "function_call"),
        ({"functions": "get_weather"}, "functions"),
    ],
    ids=["both-lists", "both-choices", "choice-alone", "bad-choice", "not-a-list"],
)
def test_contradictory_legacy_requests_are_a_400_naming_the_field(
    iris_server: StartIris, body: dict[str, Any], param: str
) -> None:
    server = iris_server()
    with (
        OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10) as client,
        pytest.raises(BadRequestError) as caught,
    ):
        client.chat.completions.create(
            model="fake-model",
            messages=ASK,  # type: ignore[arg-type]
            extra_body=body,
        )
    assert caught.value.body["param"] == param  # type: ignore[index]


def test_a_function_result_without_its_call_is_a_400(iris_server: StartIris) -> None:
    server = iris_server()
    messages: Any = [*ASK, {"role": "function", "name": "get_weather", "content": "sunny"}]
    with (
        OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10) as client,
        pytest.raises(BadRequestError) as caught,
    ):
        client.chat.completions.create(model="fake-model", messages=messages)
    assert caught.value.body["param"] == "messages[1]"  # type: ignore[index]

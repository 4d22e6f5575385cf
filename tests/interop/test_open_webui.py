"""Open WebUI's requests, replayed byte for byte from ``recordings/open_webui.json`` (built from
its source: see the recording's ``source``): a chat with every Advanced Param set, the title,
tags and follow-up tasks, and a chat with native tools and its second round.

What its user would see: every chat works or is refused with a 400 naming the one field this
provider cannot take; the tasks are answered by the model alone (never Iris's tools), even when
the chat's model is ``iris-agent``; native tools go to the model and their calls come back to
Open WebUI, never mixed with Iris's own. ``bench/open_webui_e2e.py`` drives a real Open WebUI
in chromium against Iris for the same paths (see docs/api.md)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from iris.config import config_from_dict
from iris.llm.params import LOCAL_EXTENSIONS
from iris.surfaces.api.bodies import parse_chat
from iris.surfaces.api.problems import ApiError
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.interop.conftest import StartIris, recording

pytestmark = pytest.mark.timeout(30)

KEY = "sk-owui-connection"
ADVANCED = recording("open_webui", model="m", api_key=KEY)["advanced_params"]


def replay(url: str, name: str, model: str, **changes: Any) -> httpx.Response:
    request = recording("open_webui", model=model, api_key=KEY)["requests"][name]
    body = {**request["body"], **changes}
    return httpx.post(
        f"{url}/v1/chat/completions", headers=request["headers"], json=body, timeout=10
    )


def streamed_text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    parts: list[str] = []
    for line in response.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices") or []:
                parts.append(choice["delta"].get("content") or "")
    return "".join(parts)


def offered(upstream: FakeUpstream, index: int) -> list[str]:
    tools = upstream.requests[index].body.get("tools") or []
    return [tool["function"]["name"] for tool in tools]


def test_a_chat_with_every_advanced_param_reaches_a_chat_provider_as_set(
    start_iris: StartIris, upstream: FakeUpstream
) -> None:
    server = start_iris(platforms={"api_server": {"api_key": KEY}})
    upstream.script(text("Mont ", "Blanc."))
    response = replay(server.url, "chat_advanced_params", "fake-model")
    assert streamed_text(response) == "Mont Blanc."
    sent = recording("open_webui", model="fake-model", api_key=KEY)["requests"]
    body = upstream.requests[0].body
    for name in ADVANCED:
        assert body[name] == sent["chat_advanced_params"]["body"][name], name
    assert "tools" not in body  # the plain model is the model alone


@pytest.mark.parametrize("param", ADVANCED)
def test_each_advanced_param_works_or_is_a_400_naming_it_on_a_responses_provider(
    start_iris: StartIris, upstream: FakeUpstream, param: str
) -> None:
    server = start_iris(model={"provider": "responses"})
    upstream.default = text("ok")
    request = recording("open_webui", model="fake-model", api_key=KEY)["requests"]
    body = request["chat_advanced_params"]["body"]
    plain = {k: v for k, v in body.items() if k not in ADVANCED}
    response = httpx.post(
        f"{server.url}/v1/chat/completions", json={**plain, param: body[param]}, timeout=10
    )
    if response.status_code == 200:
        assert streamed_text(response) == "ok"
        assert upstream.requests, "answered without asking the model"
        return
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["code"] == "unsupported_parameter"
    assert "(responses)" in error["message"]


@pytest.mark.parametrize("param", ADVANCED)
def test_each_advanced_param_is_honoured_or_named_by_the_embedded_model(param: str) -> None:
    config = config_from_dict({"model": {"provider": "local"}}, env={})
    request = recording("open_webui", model="gemma-3-270m", api_key=KEY)["requests"]
    body = request["chat_advanced_params"]["body"]
    plain = {k: v for k, v in body.items() if k not in ADVANCED}
    try:
        call = parse_chat({**plain, param: body[param]}, models=["gemma-3-270m"], config=config)
    except ApiError as error:
        assert error.status == 400 and error.param == param and "(local)" in error.message
        assert param not in LOCAL_EXTENSIONS
    else:
        assert param in call.turn.params or param == "max_tokens"


@pytest.mark.parametrize("task", ["title", "tags", "follow_ups"])
def test_background_tasks_to_the_agent_model_get_no_agent_tools(
    start_iris: StartIris, upstream: FakeUpstream, task: str
) -> None:
    """Open WebUI sends its tasks with the chat's model: iris-agent when the user chose it."""
    server = start_iris(platforms={"api_server": {"api_key": KEY}})
    upstream.script(text('{ "title": "Alps Summit" }'))
    response = replay(server.url, task, "iris-agent")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["choices"][0]["message"]["content"] == '{ "title": "Alps Summit" }'
    assert offered(upstream, 0) == []
    if task == "title":  # its limit reached the model as Open WebUI spelled it
        assert upstream.requests[0].body["max_tokens"] == 1000


def test_the_same_chat_to_the_agent_model_gets_the_agents_tools(
    start_iris: StartIris, upstream: FakeUpstream
) -> None:
    server = start_iris(platforms={"api_server": {"api_key": KEY}})
    upstream.script(text("ok"))
    response = replay(server.url, "chat_advanced_params", "iris-agent")
    assert streamed_text(response) == "ok"
    assert "terminal" in offered(upstream, 0) and "read_file" in offered(upstream, 0)


def test_native_tools_go_to_the_model_and_their_calls_back_to_open_webui(
    start_iris: StartIris, upstream: FakeUpstream
) -> None:
    server = start_iris(platforms={"api_server": {"api_key": KEY}})
    upstream.script(
        tool_call("get_current_weather", ['{"city": ', '"Zermatt"}'], call_id="call_up_1"),
        text("It is -3 °C and clear in Zermatt."),
    )
    first = replay(server.url, "native_tools", "iris-agent")
    assert first.status_code == 200
    calls: list[dict[str, Any]] = []
    finish = None
    for line in first.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:]).get("choices") or []:
                calls += choice["delta"].get("tool_calls") or []
                finish = choice.get("finish_reason") or finish
    assert finish == "tool_calls"
    assert calls[0]["function"]["name"] == "get_current_weather"
    arguments = "".join(call["function"].get("arguments") or "" for call in calls)
    assert json.loads(arguments) == {"city": "Zermatt"}
    # Its own tools only: never mixed with Iris's, whichever model the chat uses.
    assert offered(upstream, 0) == ["get_current_weather"]
    second = replay(server.url, "native_tools_results", "iris-agent")
    assert streamed_text(second) == "It is -3 °C and clear in Zermatt."
    results = upstream.requests[1].body["messages"]
    assert results[-1] == {
        "role": "tool",
        "tool_call_id": "call_owui_1",
        "content": '{"temperature_c": -3, "sky": "clear"}',
    }
    assert offered(upstream, 1) == ["get_current_weather"]

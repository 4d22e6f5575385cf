"""Iris's own tools only for a client that asks: the official openai SDK against Iris on a real
socket. ``/v1/models`` lists the provider's model first and ``iris-agent`` beside it; only that
id gets terminal, read_file and MCP tools (``platforms.api_server.agent_tools: on_request``),
unless the operator says ``always`` or ``never``; never with ``response_format``. Model ids are
ids: the embedded model is ``gemma-3-270m`` (described apart) and answers to ``local``."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from openai import NotFoundError, OpenAI

from iris.config import config_from_dict
from iris.surfaces.api.bodies import parse_chat
from tests.api.conftest import IrisServer, StartIris
from tests.conftest import anywhere
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(30)

KEY = "sk-opt-in"
USER = [{"role": "user", "content": "hi"}]
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def client_for(server: IrisServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10)


def offered(upstream: FakeUpstream, index: int = 0) -> list[str]:
    return [tool["function"]["name"] for tool in upstream.requests[index].body.get("tools") or []]


def test_models_lists_the_providers_model_first_and_the_agent_beside_it(
    iris_server: StartIris,
) -> None:
    server = iris_server(platforms={"api_server": {"api_key": KEY}})
    with client_for(server) as client:
        listed = client.models.list().data
        agent = client.models.retrieve("iris-agent")
    assert [model.id for model in listed] == ["fake-model", "iris-agent", "iris-voice"]
    assert agent.id == "iris-agent" and "Iris's own tools" in str(agent.model_extra)


def test_the_plain_model_is_the_model_alone_and_a_tool_call_it_invents_never_runs(
    iris_server: StartIris, upstream: FakeUpstream, tmp_path: Path
) -> None:
    server = iris_server(
        platforms={"api_server": {"api_key": KEY}}, tools={"terminal": {"cwd": str(tmp_path)}}
    )
    command = json.dumps({"command": "touch pwned"})
    upstream.script(tool_call("terminal", [command]), text("done"))
    with client_for(server) as client:
        reply = client.chat.completions.create(model="fake-model", messages=USER)  # pyright: ignore[reportArgumentType]
    assert offered(upstream) == [] and not anywhere(tmp_path, "pwned")
    assert reply.choices[0].message.content == "done"
    refusal = upstream.requests[1].body["messages"][-1]
    assert refusal["role"] == "tool" and "not offered" in refusal["content"]


def test_the_agent_model_gets_no_tools_for_structured_output(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server(platforms={"api_server": {"api_key": KEY}})
    upstream.script(text('{"a": "x"}'), text('{"a": "y"}'), text("with tools"))
    chat_format = {"type": "json_schema", "json_schema": {"name": "A", "schema": SCHEMA}}
    with client_for(server) as client:
        client.chat.completions.create(
            model="iris-agent",
            messages=USER,  # pyright: ignore[reportArgumentType]
            response_format=chat_format,  # pyright: ignore[reportArgumentType]
        )
        client.responses.create(
            model="iris-agent",
            input="hi",
            text={"format": {"type": "json_schema", "name": "A", "schema": SCHEMA}},
        )
        client.chat.completions.create(model="iris-agent", messages=USER)  # pyright: ignore[reportArgumentType]
    assert offered(upstream, 0) == [] and offered(upstream, 1) == []
    assert "terminal" in offered(upstream, 2)


def test_always_gives_every_tool_less_request_the_agent_but_not_structured_output(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server(platforms={"api_server": {"api_key": KEY, "agent_tools": "always"}})
    upstream.script(text("a"), text('{"a": "b"}'))
    with client_for(server) as client:
        client.chat.completions.create(model="fake-model", messages=USER)  # pyright: ignore[reportArgumentType]
        client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            response_format={"type": "json_object"},
        )
    assert "terminal" in offered(upstream, 0) and offered(upstream, 1) == []


def test_never_lists_no_agent_and_asking_for_it_says_why(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server(platforms={"api_server": {"api_key": KEY, "agent_tools": "never"}})
    with client_for(server) as client:
        assert [model.id for model in client.models.list()] == ["fake-model", "iris-voice"]
        with pytest.raises(NotFoundError, match="agent_tools") as caught:
            client.chat.completions.create(model="iris-agent", messages=USER)  # pyright: ignore[reportArgumentType]
    assert caught.value.code == "model_not_found" and upstream.requests == []


def test_the_old_boolean_still_reads() -> None:
    on = config_from_dict({"platforms": {"api_server": {"agent_tools": True}}}, env={})
    off = config_from_dict({"platforms": {"api_server": {"agent_tools": False}}}, env={})
    assert on.platforms.api_server.agent_tools == "always"
    assert off.platforms.api_server.agent_tools == "never"


def test_an_open_webui_task_prompt_is_a_background_task_a_chat_about_one_is_not() -> None:
    keyed = config_from_dict({"platforms": {"api_server": {"api_key": KEY}}}, env={})
    models = ["m", "iris-agent"]
    task = (
        "### Task:\nGenerate a title.\n### Chat History:\n<chat_history>\nUSER: hi\n</chat_history>"
    )
    alone = parse_chat(
        {"model": "iris-agent", "messages": [{"role": "user", "content": task}]},
        models=models,
        config=keyed,
    )
    assert alone.turn.agent_tools is False
    # Pasted into a running chat, the same text is the user's message, not an app's task.
    chat = [
        {"role": "user", "content": "look at this prompt"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": task},
    ]
    within = parse_chat({"model": "iris-agent", "messages": chat}, models=models, config=keyed)
    assert within.turn.agent_tools is True


# -- model ids are ids: the embedded model ----------------------------------------------------


@pytest.fixture
def embedded(iris_server: StartIris) -> IrisServer:
    """Iris on the embedded model (not started: listing and parsing need no model process)."""
    return iris_server(model={"provider": "local", "base_url": None, "name": ""})


def test_the_embedded_model_is_listed_under_an_id_and_described_apart(
    embedded: IrisServer,
) -> None:
    listing = httpx.get(f"{embedded.base_url}/models", timeout=10).json()["data"]
    assert [entry["id"] for entry in listing] == ["gemma-3-270m", "iris-voice"]
    assert " " not in listing[0]["id"]
    assert "embedded demo model" in listing[0]["description"]
    alias = httpx.get(f"{embedded.base_url}/models/local", timeout=10).json()
    assert alias["id"] == "gemma-3-270m"


def test_local_names_the_embedded_model_and_nothing_else() -> None:
    local = config_from_dict({"model": {"provider": "local"}}, env={})
    call = parse_chat({"model": "local", "messages": USER}, models=["gemma-3-270m"], config=local)
    assert call.model == "gemma-3-270m"
    remote = config_from_dict({"model": {"name": "m"}}, env={})
    with pytest.raises(Exception, match="model_not_found|does not exist"):
        parse_chat({"model": "local", "messages": USER}, models=["m"], config=remote)

"""MCP tool servers against the agent: real servers written with the ``mcp`` SDK
(``tests/fakes/mcp_server.py``, over stdio and Streamable HTTP) and the scripted model calling
their tools. What a user notices: the tools offered, progress as it happens, a slow tool that
keeps reporting finishing, a silent or crashed one ending as a tool error while the turn goes
on, an interrupt stopping the server's work, and a child that never sees Iris's keys."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from iris.agent import Agent, TurnRequest
from iris.agent.mcp.connection import McpConnection
from iris.events import Event, ToolEnded, ToolProgress, ToolStarted, TurnEnded
from tests.agent.mcp_turns import call, ended, offered, tool_result, until
from tests.agent.turns import USER, collect
from tests.conftest import MakeConfig
from tests.fakes.mcp_launch import http_server, stdio
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def started(upstream: FakeUpstream, make_config: MakeConfig) -> AsyncIterator[Any]:
    """``await started(servers, **sections)``: an agent whose MCP servers were started."""
    agents: list[Agent] = []

    async def start(servers: dict[str, Any], **sections: Any) -> Agent:
        config = make_config(upstream.base_url, mcp_servers=servers, **sections)
        agent = Agent(config)
        agents.append(agent)
        await agent.start_tools()
        return agent

    yield start
    for agent in agents:
        await agent.aclose()


def connection(agent: Agent, name: str) -> McpConnection:
    assert agent.mcp is not None
    return agent.mcp.connections[name]


async def test_the_servers_tools_are_offered_with_their_schema_and_progress_streams(
    started: Any, upstream: FakeUpstream
) -> None:
    agent = await started({"fake": stdio()})
    upstream.script(call("mcp_fake_steps", {"n": 5, "seconds": 1}), text("done"))
    events = await collect(agent, TurnRequest(messages=USER))
    tools = {t["function"]["name"]: t for t in upstream.requests[0].body["tools"]}
    assert {"terminal", "read_file", "mcp_fake_steps", "mcp_fake_env"} <= set(tools)
    schema = tools["mcp_fake_steps"]["function"]["parameters"]
    assert schema["properties"]["n"]["type"] == "integer"
    assert "progress steps" in tools["mcp_fake_steps"]["function"]["description"]
    kinds = [
        type(e).__name__ for e in events if isinstance(e, ToolStarted | ToolProgress | ToolEnded)
    ]
    assert kinds == ["ToolStarted"] + ["ToolProgress"] * 5 + ["ToolEnded"]
    notes = [e.note for e in events if isinstance(e, ToolProgress)]
    assert notes == [f"step {i} of 5" for i in range(1, 6)]
    assert ended(events).ok and tool_result(upstream, 1) == "steps done"
    assert isinstance(events[-1], TurnEnded) and events[-1].text == "done"


async def test_progress_without_a_message_reads_as_a_count(
    started: Any, upstream: FakeUpstream
) -> None:
    agent = await started({"fake": stdio()})
    upstream.script(call("mcp_fake_slow", {"seconds": 0.5, "every": 0.2}), text("ok"))
    events = await collect(agent, TurnRequest(messages=USER))
    notes = [e.note for e in events if isinstance(e, ToolProgress)]
    assert notes[:2] == ["1", "2"]


async def test_a_tool_slower_than_its_timeout_that_keeps_reporting_completes(
    started: Any, upstream: FakeUpstream
) -> None:
    agent = await started({"fake": stdio(timeout=1)})
    upstream.script(call("mcp_fake_slow", {"seconds": 2.5, "every": 0.2}), text("ok"))
    events = await collect(agent, TurnRequest(messages=USER))
    assert ended(events).ok
    assert tool_result(upstream, 1).startswith("slow done after")


async def test_a_tool_that_stops_reporting_times_out_as_a_tool_error(
    started: Any, upstream: FakeUpstream
) -> None:
    agent = await started({"fake": stdio(timeout=1)})
    upstream.script(call("mcp_fake_silent", {"seconds": 30}), text("it timed out"))
    events = await collect(agent, TurnRequest(messages=USER))
    assert not ended(events).ok
    assert "neither a result nor progress for 1 s" in tool_result(upstream, 1)
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.text == "it timed out"


async def test_max_duration_caps_a_call_whatever_its_progress(
    started: Any, upstream: FakeUpstream
) -> None:
    agent = await started({"fake": stdio(timeout=1, max_duration=1.5)})
    upstream.script(call("mcp_fake_slow", {"seconds": 20, "every": 0.2}), text("ok"))
    events = await collect(agent, TurnRequest(messages=USER))
    assert not ended(events).ok
    assert "max_duration (1.5 s)" in tool_result(upstream, 1)


async def test_a_server_that_dies_mid_call_ends_that_call_not_the_turn_and_comes_back(
    started: Any, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    agent = await started({"fake": stdio()})
    upstream.script(call("mcp_fake_crash", {}), text("the tool broke"))
    with caplog.at_level(logging.WARNING, logger="iris.agent.mcp.connection"):
        events = await collect(agent, TurnRequest(messages=USER))
        assert not ended(events).ok
        assert "closed the connection during the call" in tool_result(upstream, 1)
        end = events[-1]
        assert isinstance(end, TurnEnded) and end.text == "the tool broke"
        # It is started again (after a backoff) and its tools come back.
        await until(
            agent,
            lambda: (
                connection(agent, "fake").attempts >= 2 and "mcp_fake_env" in agent.tools.names()
            ),
        )
    warnings = [r.getMessage() for r in caplog.records if "fake" in r.getMessage()]
    assert len(warnings) == 1 and "crashed on purpose" in warnings[0]


async def test_a_missing_server_is_logged_once_retried_and_the_others_work(
    started: Any, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    missing = {"command": str(tmp_path / "no-such-server")}
    with caplog.at_level(logging.DEBUG, logger="iris.agent.mcp.connection"):
        agent = await started({"gone": missing, "fake": stdio()})
        assert "mcp_fake_env" in agent.tools.names()
        assert not [n for n in agent.tools.names() if n.startswith("mcp_gone_")]
        await until(agent, lambda: connection(agent, "gone").attempts >= 2)
    warned = [
        r for r in caplog.records if r.levelno == logging.WARNING and "gone" in r.getMessage()
    ]
    assert len(warned) == 1 and "command not found" in warned[0].getMessage()
    lines = agent.tool_lines()
    assert any(line.startswith("mcp gone: unavailable (command not found") for line in lines)
    assert any(line.startswith("mcp fake: connected,") for line in lines)
    upstream.script(call("mcp_fake_env", {"name": "PATH"}), text("fine"))
    events = await collect(agent, TurnRequest(messages=USER))
    assert ended(events).ok


async def test_a_server_that_fails_to_start_is_logged_with_its_stderr(
    started: Any, caplog: pytest.LogCaptureFixture
) -> None:
    boom = {"command": "sh", "args": ["-c", "echo 'boom: no licence key' >&2; exit 2"]}
    with caplog.at_level(logging.WARNING, logger="iris.agent.mcp.connection"):
        agent = await started({"boom": boom})
    assert connection(agent, "boom").state == "down"
    assert any("boom: no licence key" in r.getMessage() for r in caplog.records)
    assert agent.tools.names() == ["terminal", "read_file"]


async def test_tools_list_changed_refreshes_what_the_model_is_offered(
    started: Any, upstream: FakeUpstream
) -> None:
    agent = await started({"fake": stdio()})
    assert "mcp_fake_extra" not in agent.tools.names()
    upstream.script(call("mcp_fake_grow", {}), text("grown"))
    await collect(agent, TurnRequest(messages=USER))
    await until(agent, lambda: "mcp_fake_extra" in agent.tools.names())
    upstream.script(call("mcp_fake_extra", {}), text("ok"))
    events = await collect(agent, TurnRequest(messages=USER))
    assert "mcp_fake_extra" in offered(upstream, 2)
    assert ended(events).ok and tool_result(upstream, 3) == "extra here"


async def test_an_interrupt_mid_call_cancels_the_servers_work_within_a_second(
    started: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    agent = await started({"fake": stdio()})
    marker = tmp_path / "cancelled"
    upstream.script(call("mcp_fake_hang", {"marker": str(marker)}))
    events: list[Event] = []
    async with agent.run(TurnRequest(messages=USER)) as turn:
        async for event in turn:
            events.append(event)
            if isinstance(event, ToolProgress):
                turn.interrupt()
                async with asyncio.timeout(1.0):  # the bound, from the interrupt
                    # The server's process writes it: there is no event to wait on.
                    while not marker.exists():  # noqa: ASYNC110
                        await asyncio.sleep(0.01)
    assert marker.read_text() == "cancelled"
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.reason == "interrupted"


async def test_the_child_sees_no_provider_key_only_its_env_and_the_allow_list(
    started: Any, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-server-env")
    monkeypatch.setenv("IRIS_SECRET_THING", "iris-secret")
    monkeypatch.setenv("UNLISTED_VARIABLE", "not for children")
    agent = await started({"fake": stdio(env={"FAKE_OWN": "given"})})
    seen: dict[str, str] = {}
    for name in ("OPENAI_API_KEY", "IRIS_SECRET_THING", "UNLISTED_VARIABLE", "FAKE_OWN", "PATH"):
        upstream.script(call("mcp_fake_env", {"name": name}), text("ok"))
        await collect(agent, TurnRequest(messages=USER))
        seen[name] = tool_result(upstream, len(upstream.requests) - 1)
    assert seen["OPENAI_API_KEY"] == "<unset>"
    assert seen["IRIS_SECRET_THING"] == "<unset>"
    assert seen["UNLISTED_VARIABLE"] == "<unset>"
    assert seen["FAKE_OWN"] == "given"
    assert seen["PATH"] not in ("", "<unset>")


async def test_results_images_structured_content_and_is_error(
    started: Any, upstream: FakeUpstream
) -> None:
    agent = await started({"fake": stdio()})
    upstream.script(
        call("mcp_fake_pictures", {}), text("ok"), call("mcp_fake_refuse", {}), text("ok")
    )
    await collect(agent, TurnRequest(messages=USER))
    events = await collect(agent, TurnRequest(messages=USER))
    lines = tool_result(upstream, 1).splitlines()
    assert lines == ["a red square", "[image: image/png, 8 bytes]", '{"width": 1, "color": "red"}']
    assert not ended(events).ok and tool_result(upstream, 3) == "error: no such record"


async def test_include_exclude_and_tools_enabled_choose_the_offered_tools(
    started: Any, upstream: FakeUpstream
) -> None:
    agent = await started(
        {"a": stdio(include=["env", "st*"], exclude=["steps"]), "b": stdio()},
        tools={"enabled": ["terminal", "mcp_b_env", "mcp_b_pic*"]},
    )
    names = agent.tools.names()
    assert [n for n in names if n.startswith("mcp_a_")] == ["mcp_a_env"]
    assert sorted(n for n in names if n.startswith("mcp_b_")) == ["mcp_b_env", "mcp_b_pictures"]
    assert "read_file" not in names


async def test_tools_are_offered_only_where_agent_tools_are(
    started: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    agent = await started({"fake": stdio()})
    marker = tmp_path / "cancelled"
    upstream.script(call("mcp_fake_hang", {"marker": str(marker)}), text("ok"))
    events = await collect(agent, TurnRequest(messages=USER, agent_tools=False))
    assert offered(upstream, 0) == []
    assert not ended(events).ok and "not offered" in tool_result(upstream, 1)


async def test_a_server_over_streamable_http(
    started: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    with http_server(tmp_path) as url:
        agent = await started({"web": {"url": url, "headers": {"X-Test": "1"}}})
        upstream.script(call("mcp_web_steps", {"n": 3, "seconds": 0.6}), text("done"))
        events = await collect(agent, TurnRequest(messages=USER))
        notes = [e.note for e in events if isinstance(e, ToolProgress)]
        assert notes == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
        assert ended(events).ok and tool_result(upstream, 1) == "steps done"
        await agent.aclose()


async def test_servers_that_never_answer_are_given_up_on_after_connect_timeout(
    started: Any, upstream: FakeUpstream
) -> None:
    mute = {"command": "sleep", "args": ["60"], "connect_timeout": 1}  # reads nothing, says nothing
    agent = await started({"mute1": mute, "mute2": mute, "fake": stdio()})
    for name in ("mute1", "mute2"):
        assert connection(agent, name).state == "down"
        assert connection(agent, name).error == "it did not answer within connect_timeout"
    assert "mcp_fake_env" in agent.tools.names()
    upstream.script(text("still here"))
    events = await collect(agent, TurnRequest(messages=USER))
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.text == "still here"


async def test_sampling_on_runs_the_servers_request_on_the_model_without_tools(
    started: Any, upstream: FakeUpstream
) -> None:
    agent = await started({"fake": stdio(sampling={"enabled": True, "max_per_minute": 1})})
    upstream.script(
        call("mcp_fake_ask_model", {"question": "Capital of France?"}),
        text("Paris"),  # the server's request for the model
        text("It says Paris."),
    )
    events = await collect(agent, TurnRequest(messages=USER))
    assert tool_result(upstream, 2) == "the model said: Paris"
    asked = upstream.requests[1].body
    assert "tools" not in asked or not asked["tools"]
    assert asked["messages"] == [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Capital of France?"},
    ]
    end = events[-1]
    assert isinstance(end, TurnEnded)
    # Three model requests, each 10 in / 5 out on the fake upstream: the server's counts too.
    assert end.usage["input_tokens"] == 30 and end.usage["output_tokens"] == 15
    # Past max_per_minute the next request is refused with the reason.
    upstream.script(call("mcp_fake_ask_model", {"question": "Again?"}), text("ok"))
    await collect(agent, TurnRequest(messages=USER))
    assert "max_per_minute (1)" in tool_result(upstream, 4)


async def test_sampling_is_off_by_default_and_refused_with_the_reason(
    started: Any, upstream: FakeUpstream
) -> None:
    agent = await started({"fake": stdio()})
    upstream.script(call("mcp_fake_ask_model", {"question": "Hi?"}), text("ok"))
    await collect(agent, TurnRequest(messages=USER))
    result = tool_result(upstream, 1)
    assert result.startswith("refused: Iris refused: sampling is off for this server")
    assert "mcp_servers.fake.sampling.enabled" in result
    assert len(upstream.requests) == 2  # the model was never asked for the server


async def test_the_model_lists_and_reads_a_servers_resources(
    started: Any, upstream: FakeUpstream
) -> None:
    agent = await started({"fake": stdio()})
    upstream.script(
        call("mcp_fake_resources_list", {}),
        call("mcp_fake_resources_read", {"uri": "notes://today"}),
        text("Buy milk."),
    )
    await collect(agent, TurnRequest(messages=USER))
    assert {"mcp_fake_resources_list", "mcp_fake_resources_read"} <= set(offered(upstream, 0))
    listed = tool_result(upstream, 1)
    assert listed.startswith("notes://today — today — text/plain")
    told = [m for m in upstream.requests[2].body["messages"] if m["role"] == "tool"]
    assert told[-1]["content"] == "buy milk"

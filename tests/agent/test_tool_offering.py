"""A round runs only the tools it offered the model: a call to anything else is a tool error the
model reads, and the tool never runs (issue 10, finding 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iris.agent import Agent, TurnRequest
from iris.events import ToolEnded, TurnEnded
from tests.agent.turns import USER, collect
from tests.conftest import MakeConfig, anywhere
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
async def agent(upstream: FakeUpstream, make_config: MakeConfig, tmp_path: Path):
    config = make_config(upstream.base_url, tools={"terminal": {"cwd": str(tmp_path)}})
    agent = Agent(config)
    yield agent
    await agent.aclose()


def offered(upstream: FakeUpstream, n: int) -> list[str]:
    return [t["function"]["name"] for t in upstream.requests[n].body.get("tools") or []]


async def test_agent_tools_off_a_terminal_call_is_refused_not_run(
    agent: Agent, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(tool_call("terminal", ['{"command": "touch pwned"}']), text("ok"))
    events = await collect(agent, TurnRequest(messages=USER, agent_tools=False))
    assert offered(upstream, 0) == []
    assert not anywhere(tmp_path, "pwned")
    ended = next(e for e in events if isinstance(e, ToolEnded))
    assert not ended.ok and "not offered" in ended.output_preview
    # The model read the refusal and answered.
    refusal = upstream.requests[1].body["messages"][-1]
    assert refusal["role"] == "tool" and "not offered" in refusal["content"]
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.text == "ok"


async def test_a_tool_call_in_the_last_round_is_not_run(
    upstream: FakeUpstream, make_config: MakeConfig, tmp_path: Path
) -> None:
    workspace = {"workspace": str(tmp_path / "ws"), "workspace_scope": "shared"}
    config = make_config(upstream.base_url, tools={"max_iterations": 2, "terminal": workspace})
    upstream.script(
        tool_call("terminal", ['{"command": "touch first"}']),
        tool_call("terminal", ['{"command": "touch second"}']),
    )
    agent = Agent(config)
    events = await collect(agent, TurnRequest(messages=USER))
    await agent.aclose()
    assert offered(upstream, 0) == ["terminal", "read_file"]
    assert offered(upstream, 1) == []
    assert (tmp_path / "ws" / "first").exists()
    assert not (tmp_path / "ws" / "second").exists()
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.reason == "max_iterations"


async def test_a_tool_left_out_of_the_config_is_not_run(
    upstream: FakeUpstream, make_config: MakeConfig, tmp_path: Path
) -> None:
    config = make_config(
        upstream.base_url, tools={"enabled": ["read_file"], "terminal": {"cwd": str(tmp_path)}}
    )
    upstream.script(tool_call("terminal", ['{"command": "touch pwned"}']), text("ok"))
    agent = Agent(config)
    events = await collect(agent, TurnRequest(messages=USER))
    await agent.aclose()
    assert offered(upstream, 0) == ["read_file"]
    assert not anywhere(tmp_path, "pwned")
    ended = next(e for e in events if isinstance(e, ToolEnded))
    assert not ended.ok and "not offered" in ended.output_preview


async def test_a_user_who_is_not_allowed_never_gets_terminal(
    agent: Agent, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(tool_call("terminal", ['{"command": "touch pwned"}']), text("ok"))
    events = await collect(agent, TurnRequest(messages=USER, allow_terminal=False))
    assert offered(upstream, 0) == ["read_file"]
    assert not anywhere(tmp_path, "pwned")
    ended = next(e for e in events if isinstance(e, ToolEnded))
    assert not ended.ok and "not allowed" in ended.output_preview

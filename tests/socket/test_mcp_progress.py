"""An MCP tool's progress on the iris socket: the real server and agent, the fake MCP server
(``tests/fakes/mcp_server.py``) as a stdio child, the scripted model calling its tool."""

from __future__ import annotations

import json

import pytest

from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.socket.conftest import StartServer

pytestmark = pytest.mark.timeout(60)


async def test_five_progress_steps_are_five_tool_progress_frames_before_tool_end(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    server = await iris_server(streaming={"enabled": True}, mcp_servers={"fake": stdio()})
    upstream.script(
        tool_call("mcp_fake_steps", [json.dumps({"n": 5, "seconds": 2})]), text("all done")
    )
    device = await server.connect()
    await device.send({"type": "message.send", "text": "run the steps"})
    frames = await device.turn(within=20)
    tools = [f for f in frames if f["type"].startswith("tool.")]
    assert [f["type"] for f in tools] == ["tool.start"] + ["tool.progress"] * 5 + ["tool.end"]
    assert [f["note"] for f in tools[1:-1]] == [f"step {i} of 5" for i in range(1, 6)]
    assert all(f["name"] == "mcp_fake_steps" for f in tools)
    assert tools[-1]["ok"] is True
    stop = next(f for f in frames if f["type"] == "message.stop")
    assert stop["final_text"] == "all done"


async def test_status_lists_the_connected_servers_and_their_tools(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    server = await iris_server(
        mcp_servers={"fake": stdio(include=["env", "steps"]), "off": stdio(enabled=False)}
    )
    device = await server.connect()
    await device.send({"type": "message.send", "text": "/status"})
    frames = await device.until("command")
    status = str(frames[-1]["text"])
    assert "mcp fake: connected, 2 tools: mcp_fake_steps, mcp_fake_env" in status
    assert "mcp off: disabled" in status

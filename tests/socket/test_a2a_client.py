"""Iris to Iris over A2A: one server's model calls the other (``a2a_agents``) as the tool
``a2a_helper``; the remote's streamed reply is the tool's live progress on the caller's devices,
and an interrupted turn cancels the remote task. Both servers are real (uvicorn on 127.0.0.1),
the a2a-sdk client and server between them."""

from __future__ import annotations

import asyncio
import json

import pytest

from iris.agent.approvals import ApprovalPolicy
from iris.config import ApprovalConfig
from tests.fakes.scenarios import gated, hold
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.socket.a2a_peers import KEY, a2a_server, base_url
from tests.socket.conftest import IrisServer, StartServer

pytestmark = pytest.mark.timeout(60)


async def caller_of(iris_server: StartServer, helper: IrisServer) -> IrisServer:
    agents = {"helper": {"url": base_url(helper), "headers": {"Authorization": f"Bearer {KEY}"}}}
    return await iris_server(streaming={"enabled": True}, a2a_agents=agents)


async def test_the_remote_reply_streams_as_the_tool_progress_before_the_remote_finishes(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(
        tool_call("a2a_helper", [json.dumps({"message": "hello helper"})]),
        gated("Remote", " answer", after=1),  # the helper's model
        text("The helper answered."),
    )
    helper = await a2a_server(iris_server)
    caller = await caller_of(iris_server, helper)
    device = await caller.connect()
    await device.send({"type": "message.send", "text": "ask the helper"})
    frames = await device.until("tool.progress", within=20)
    assert frames[-1]["name"] == "a2a_helper"
    seen = [frames[-1]["note"]]
    while "Remote" not in seen[-1]:
        seen.append((await device.until("tool.progress"))[-1]["note"])
    upstream.release()  # the helper's model finishes only now: its first text came before
    rest = await device.turn(within=20)
    end = next(f for f in rest if f["type"] == "tool.end")
    assert end["ok"] is True and "Remote answer" in end["output_preview"]
    notes = seen + [f["note"] for f in rest if f["type"] == "tool.progress"]
    assert notes[0] == "working" and notes[-1] == "completed"
    assert notes.count("Remote answer") == 1  # each piece of text told once
    stop = next(f for f in rest if f["type"] == "message.stop")
    assert stop["final_text"] == "The helper answered."
    asked = upstream.requests[1].body["messages"][-1]
    assert asked["role"] == "user" and asked["content"] == "hello helper"


async def test_an_interrupted_turn_cancels_the_remote_task(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(
        tool_call("a2a_helper", [json.dumps({"message": "take your time"})]),
        hold("Still"),  # the helper's model, until its turn is cancelled
    )
    helper = await a2a_server(iris_server)
    caller = await caller_of(iris_server, helper)
    device = await caller.connect()
    await device.send({"type": "message.send", "text": "ask"})
    frames: list[dict[str, object]] = []
    while not any("Still" in str(f.get("note", "")) for f in frames):
        frames += await device.until("tool.progress", within=20)
    await device.send({"type": "turn.cancel"})
    await device.turn()
    # The helper's turn was interrupted: its model's stream was closed.
    assert await asyncio.to_thread(upstream.disconnected.wait, 5)


def test_a2a_tools_ask_for_approval_like_mcp_tools() -> None:
    asking = ApprovalPolicy.configured(ApprovalConfig(mode="ask"))
    assert asking.asks("a2a_helper") and asking.asks("mcp_x_y")
    trusted = ApprovalPolicy.configured(ApprovalConfig(mode="ask", auto=["a2a_helper"]))
    assert not trusted.asks("a2a_helper")

"""What an iris chat keeps in its history after each way a turn ends (the one rule of
``iris.agent.history``), seen in the next request to the model. The crashed ending (a server
killed mid-reply, repaired when it starts again) is in ``test_crash_history.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from iris.state.sessions import SqliteSessions
from iris.state.sqlite import Store
from tests.fakes.upstream import FakeUpstream, hold, stream_error, text, tool_call
from tests.socket.conftest import Device, StartServer
from tests.socket.cut_turns import leave_a_cut_turn

pytestmark = pytest.mark.timeout(30)

STREAMING = {"enabled": True}
EVERY_DELTA = {"platforms": {"iris": {"buffer_threshold": 1}}}


def sent(upstream: FakeUpstream) -> list[tuple[str, Any]]:
    return [(m["role"], m["content"]) for m in upstream.requests[-1].body["messages"]]


async def say(device: Device, text_: str) -> list[dict[str, Any]]:
    await device.send({"type": "message.send", "text": text_})
    return await device.turn()


async def test_a_complete_reply_is_kept(iris_server: StartServer, upstream: FakeUpstream) -> None:
    upstream.script(text("Blue."), text("Yes."))
    device = await (await iris_server(streaming=STREAMING, tools={"enabled": []})).connect()
    await say(device, "sky?")
    await say(device, "sure?")
    assert sent(upstream) == [("user", "sky?"), ("assistant", "Blue."), ("user", "sure?")]


async def test_a_cancelled_reply_is_kept_as_shown_and_marked_cut(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Once ", "upon "), text("a time."))
    server = await iris_server(streaming=STREAMING, display=EVERY_DELTA, tools={"enabled": []})
    device = await server.connect()
    await device.send({"type": "message.send", "text": "tell a story"})
    await device.until("message.update", text="Once upon ")
    await device.send({"type": "turn.cancel"})
    frames = await device.turn()
    assert frames[-2]["final_text"] == "Once upon"
    await say(device, "go on")
    assert sent(upstream) == [
        ("user", "tell a story"),
        ("assistant", "Once upon\n\n[interrupted]"),
        ("user", "go on"),
    ]


async def test_a_reply_that_failed_midway_is_kept_as_far_as_it_was_shown(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(stream_error("The sky ", "is bl"), text("blue."))
    device = await (await iris_server(streaming=STREAMING, tools={"enabled": []})).connect()
    frames = await say(device, "sky?")
    assert any(f["type"] == "error" for f in frames)
    await say(device, "go on")
    assert sent(upstream) == [
        ("user", "sky?"),
        ("assistant", "The sky is bl\n\n[interrupted]"),
        ("user", "go on"),
    ]


async def test_a_failure_after_a_tool_keeps_the_tool_exchange(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(
        tool_call("terminal", ['{"command": "echo hi"}'], content="Looking."),
        stream_error("It says ", "h"),
        text("hi."),
    )
    server = await iris_server(streaming=STREAMING, tools={"enabled": ["terminal"]})
    device = await server.connect()
    await say(device, "run it")
    await say(device, "go on")
    history = sent(upstream)
    assert [role for role, _ in history] == ["user", "assistant", "tool", "assistant", "user"]
    assert history[1] == ("assistant", "Looking.")
    assert "hi" in history[2][1]
    assert history[3] == ("assistant", "It says h\n\n[interrupted]")


async def test_a_cut_reply_already_kept_is_not_repaired_twice_after_a_crash(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    # The turn failed and kept its shown text, then the server died before the turn's last
    # frames reached the log: on restart the log still shows the turn open.
    path = tmp_path / "iris.db"
    await leave_a_cut_turn(path, question_saved=True)
    store = Store(path)
    kept = {"role": "assistant", "content": "The sky is bl\n\n[interrupted]"}
    await SqliteSessions(store).append("iris:main", [kept])
    store.close()
    device = await (await iris_server(streaming=STREAMING)).connect(after_seq=0)
    await device.turn()
    upstream.script(text("blue."))
    await say(device, "go on")
    assert sent(upstream) == [
        ("user", "what colour is the sky?"),
        ("assistant", "The sky is bl\n\n[interrupted]"),
        ("user", "go on"),
    ]

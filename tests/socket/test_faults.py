"""Faults end cleanly on the socket: a store that cannot write, text that cannot be encoded.
The device always gets an ``error`` frame and the turn always ends (``typing {on:false}``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.upstream import FakeUpstream, gated, text
from tests.socket.conftest import StartServer
from tests.socket.locks import locked

STREAMING = {"enabled": True}


def types(frames: list[dict[str, Any]]) -> list[str]:
    return [f["type"] for f in frames]


async def test_a_message_the_log_cannot_take_gets_store_unavailable(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(text("after the lock"))
    server = await iris_server(streaming=STREAMING)
    device, other = await server.connect(), await server.connect()
    with locked(server, tmp_path / "iris.db"):
        await device.send({"type": "message.send", "text": "hello?"})
        # The frame log queues its writes; the turn's first step, saving the question in the
        # history, meets the lock and ends the turn before the model is asked.
        frames = await device.turn()
        errors = [f for f in frames if f["type"] == "error"]
        assert [e["code"] for e in errors] == ["store_unavailable"] and errors[0]["message"]
        assert upstream.requests == []  # no turn ran for a message nobody could keep
        await device.send({"type": "resume", "after_seq": 0})  # reads still work
        await device.send({"type": "ping"})
        while (await device.recv())["type"] != "pong":
            pass
    await device.send({"type": "message.send", "text": "and now?"})
    frames = await device.turn()
    assert frames[-2]["final_text"] == "after the lock"
    failed = await other.turn()  # the others saw the failed turn end too
    assert failed[0]["text"] == "hello?" and types(failed)[-1] == "typing"
    seen = await other.turn()
    assert seen[0]["text"] == "and now?" and "error" not in types(seen)


async def test_a_turn_whose_frames_the_log_cannot_take_still_ends(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(gated("first ", "second ", "third", after=1), text("fine again"))
    server = await iris_server(
        streaming=STREAMING, display={"platforms": {"iris": {"buffer_threshold": 1}}}
    )
    device, other = await server.connect(), await server.connect()
    await device.send({"type": "message.send", "text": "go"})
    await device.until("message.update", text="first ")
    with locked(server, tmp_path / "iris.db"):
        upstream.release()
        for watcher in (device, other):
            frames = await watcher.turn()
            assert types(frames)[-3:] == ["message.stop", "error", "typing"]
            assert frames[-3]["final_text"].startswith("first ")
            assert frames[-2]["code"] == "store_unavailable"
    await device.send({"type": "message.send", "text": "again"})
    assert (await device.turn())[-2]["final_text"] == "fine again"


async def test_a_lone_surrogate_from_the_model_does_not_leave_the_turn_open(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("bad \ud800 half", " and the rest"))
    server = await iris_server(streaming=STREAMING)
    device = await server.connect()
    await device.send({"type": "message.send", "text": "hi"})
    frames = await device.turn()
    assert frames[-2]["type"] == "message.stop"
    assert frames[-2]["final_text"] == "bad \ufffd half and the rest"
    await device.send({"type": "ping"})
    assert (await device.recv())["type"] == "pong"  # the socket is still up
    back = await server.connect(after_seq=0)  # and the log replays it
    replay = await back.until("message.stop")
    assert replay[-1]["final_text"] == "bad \ufffd half and the rest"

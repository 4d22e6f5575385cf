"""Finding 6, the crash: ``iris serve`` killed (-9) mid-reply. When it comes back, devices see
the turn closed with the text they saw, and the model's history holds that same text — the
model and the devices agree on what was said."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.adversarial.conftest import StartServed
from tests.fakes.upstream import FakeUpstream, hold, text

pytestmark = pytest.mark.timeout(90)

TOKEN = "crash-token-0123456789"
IRIS = {
    "platforms": {"iris": {"enabled": True, "tokens": [TOKEN]}},
    "streaming": {"enabled": True},
}


async def device(base: str, after_seq: int | None = None) -> ClientConnection:
    ws = await connect(base.replace("http://", "ws://") + "/iris/ws", open_timeout=10)
    hello: dict[str, Any] = {"type": "hello", "token": TOKEN}
    if after_seq is not None:
        hello["after_seq"] = after_seq
    await ws.send(json.dumps(hello))
    assert (await recv(ws))["type"] == "ready"
    return ws


async def recv(ws: ClientConnection) -> dict[str, Any]:
    async with asyncio.timeout(15):
        return json.loads(await ws.recv())


async def until(ws: ClientConnection, kind: str, **fields: Any) -> list[dict[str, Any]]:
    frames = [await recv(ws)]
    while frames[-1]["type"] != kind or any(frames[-1].get(k) != v for k, v in fields.items()):
        frames.append(await recv(ws))
    return frames


async def logged(db: Path, seq: int) -> None:
    """Wait until the frame log on disk holds ``seq`` (frames are written in order)."""
    async with asyncio.timeout(10):
        while True:
            with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
                if conn.execute("SELECT 1 FROM iris_frames WHERE seq >= ?", (seq,)).fetchone():
                    return
            await asyncio.sleep(0.02)


async def test_a_reply_cut_by_kill_9_is_closed_and_kept_in_the_history(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(hold("The answer ", "so far"), text("Picking up."))
    server, base = served(**IRIS)
    ws = await device(base)
    await ws.send(json.dumps({"type": "message.send", "text": "tell me"}))
    frames = await until(ws, "message.update", text="The answer so far")
    message_id = frames[-1]["message_id"]
    seen = max(f["seq"] for f in frames)
    # The log writes behind the devices (a frame goes out without waiting on SQLite), so a kill
    # in the same millisecond could beat the write of what was just shown; the finding is what
    # happens to a turn cut mid-reply, so the kill comes once the log holds what the device saw.
    await logged(tmp_path / "iris.db", seen)
    server.process.kill()  # kill -9 while the model is still streaming
    server.process.wait(10)
    await ws.close()
    upstream.release()

    server, base = served(**IRIS)  # same store file, new process
    back = await device(base, after_seq=seen)
    closing = await until(back, "typing", on=False)
    stop = next(f for f in closing if f["type"] == "message.stop")
    assert stop["message_id"] == message_id and stop["final_text"] == "The answer so far"
    assert any(f["type"] == "error" and f["code"] == "interrupted" for f in closing)

    await back.send(json.dumps({"type": "message.send", "text": "go on"}))
    await until(back, "typing", on=False)
    await back.close()
    sent = upstream.requests[-1].body["messages"]
    said = [(m["role"], m["content"]) for m in sent if m["role"] != "system"]
    assert said[0] == ("user", "tell me")
    assert said[1][0] == "assistant" and said[1][1].startswith("The answer so far")
    assert said[-1] == ("user", "go on")
    assert "Traceback" not in "".join(server.drain())

"""Scheduled runs happen once across ``iris serve`` processes and restarts.

Two processes share a real redis-server: a run due while its process is killed -9 mid-reply is
run again by the survivor once its claim runs out, and reaches the chat complete exactly once.
A process restarted after its run was due (every process was down) runs it once, with a note
saying when it was due, however many times a recurring rule was due meanwhile.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.served import Served, serve
from tests.fakes.upstream import FakeUpstream, gated, text
from tests.scale.across import nothing_more
from tests.scale.conftest import LEASE, RedisServer, socket_url
from tests.scale.devices import STREAMING, device
from tests.socket.conftest import TOKEN, Device

pytestmark = pytest.mark.timeout(90)


async def ask(dev: Device, words: str) -> str:
    """A command's answer (to this device alone)."""
    await dev.send({"type": "message.send", "text": words})
    return [f for f in await dev.until("command") if f["type"] == "command"][-1]["text"]


async def test_a_run_whose_process_is_killed_mid_reply_is_delivered_once_by_the_survivor(
    two: list[tuple[Served, str]], upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    (a, a_url), (b, b_url) = two
    upstream.script(gated("The sky ", "is ", "blue", after=2), text("Still blue."))
    on_a, on_b = await device(a_url), await device(b_url)
    answer = await ask(on_a, "/remind in 1s what colour is the sky?")
    schedule_id = answer.split(":")[0].removeprefix("⏰ ")
    await on_b.until("message.update", text="The sky is ", within=15)

    holder = redis_server.client().get("iris{schedules}:run:" + schedule_id)
    assert isinstance(holder, bytes | str), "the running process holds the run's claim"
    pid = int((holder.decode() if isinstance(holder, bytes) else holder).split(":")[1])
    owner, survivor = (a, on_b) if pid == a.process.pid else (b, on_a)
    owner.process.kill()  # kill -9 mid-reply
    owner.process.wait(10)

    frames = await survivor.until("message.stop", final_text="Still blue.", within=LEASE * 4 + 15)
    notes = [f["text"] for f in frames if f["type"] == "commentary"]
    assert any("first try" in n and "was cut" in n for n in notes), notes
    starts = [f for f in frames if f["type"] == "message.start"]
    assert starts[-1]["schedule_id"] == schedule_id
    await survivor.until("typing", on=False)
    await nothing_more(survivor)
    stops = [f for f in survivor.frames if f["type"] == "message.stop"]
    assert [s["final_text"] for s in stops].count("Still blue.") == 1  # complete once
    assert len(upstream.requests) == 2  # the cut try and the one that finished, no third
    await done(survivor)
    await nothing_more(survivor)


async def done(dev: Device) -> None:
    """The one-off is recorded as run (a moment after its last frames: the claim's finish)."""
    async with asyncio.timeout(10):
        while True:
            if "no schedules" in await ask(dev, "/schedules"):
                return
            await asyncio.sleep(0.1)


async def test_a_run_missed_while_down_runs_once_at_restart_with_a_note(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    sections: dict[str, Any] = {
        "platforms": {"iris": {"enabled": True, "tokens": [TOKEN]}},
        "streaming": STREAMING,
    }
    server, url = serve(tmp_path, upstream.base_url, **sections)
    try:
        dev = await device(socket_url(url))
        answer = await ask(dev, "/every hour what happened?")
        schedule_id = answer.split(":")[0].removeprefix("🔁 ")
        await dev.close()
    finally:
        server.stop()
    # Every process was down while it was due, three times over (its last was 3 h ago).
    due = time.time() - 3 * 3600 - 60
    with sqlite3.connect(tmp_path / "iris.db") as db:
        db.execute("UPDATE iris_schedules SET next_at=? WHERE id=?", (due, schedule_id))
    db.close()

    upstream.script(text("Quiet night."))
    server, url = serve(tmp_path, upstream.base_url, **sections)
    try:
        dev = await device(socket_url(url), after_seq=0)
        frames = await dev.until("message.stop", final_text="Quiet night.", within=15)
        notes = [f["text"] for f in frames if f["type"] == "commentary"]
        assert any(n.startswith("⏰ was due at ") for n in notes), notes
        assert [f for f in frames if f["type"] == "message.start"][-1]["schedule_id"] == schedule_id
        await dev.until("typing", on=False)
        listed = await ask(dev, "/schedules")
        assert schedule_id in listed  # still there, next due within the hour, not in the past
        await nothing_more(dev)
        assert len(upstream.requests) == 1  # once, not once per missed hour
        await dev.close()
    finally:
        server.stop()

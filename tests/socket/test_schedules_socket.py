"""Scheduled runs on the iris socket, through ``iris serve``'s own scheduler: the command is
answered to the device alone, and the run streams into the chat for every device, its
``message.start`` carrying the schedule's id."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.fakes.upstream import FakeUpstream, hold, text
from tests.socket.conftest import StartServer

pytestmark = pytest.mark.timeout(60)

CHUNKS = [f"tick{i} " for i in range(40)]
REPLY = "".join(CHUNKS).strip()


async def test_an_iris_chat_gets_its_scheduled_reply_streamed_and_marked(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    server = await iris_server(streaming={"enabled": True})
    device = await server.connect(chat_id="jobs")
    other = await server.connect(chat_id="jobs")
    upstream.script(text(*CHUNKS, delay=0.02))
    await device.send({"type": "message.send", "text": "/remind in 1s what time is it"})
    (answer,) = [f for f in await device.until("command") if f["type"] == "command"]
    assert answer["command"] == "remind" and answer["text"].endswith(": what time is it")
    schedule_id = answer["text"].split(":")[0].removeprefix("⏰ ")

    for seen in (device, other):  # every device of the chat, not only the one that asked
        frames = await seen.turn(within=15)
        starts = [f for f in frames if f["type"] == "message.start"]
        assert starts and starts[0]["schedule_id"] == schedule_id
        updates = [f for f in frames if f["type"] == "message.update"]
        assert len(updates) >= 2, "streamed, not sent whole"
        stops = [f for f in frames if f["type"] == "message.stop"]
        assert stops[-1]["final_text"] == REPLY
        echo = [f for f in frames if f["type"] == "message" and f.get("role") == "user"]
        assert echo and echo[0]["text"] == "what time is it"
    assert upstream.requests[-1].body["messages"][-1]["content"] == "what time is it"

    async with asyncio.timeout(10):  # recorded as run a moment after its last frames
        while True:
            await device.send({"type": "message.send", "text": "/schedules"})
            listed = [f for f in await device.until("command") if f["type"] == "command"]
            if "no schedules" in listed[-1]["text"]:
                break
            await asyncio.sleep(0.1)


async def test_limits_and_bad_times_are_refused_in_one_line(iris_server: StartServer) -> None:
    server = await iris_server(schedules={"max_per_chat": 1, "min_interval_s": 600})
    device = await server.connect(chat_id="limits")

    async def ask(words: str) -> str:
        await device.send({"type": "message.send", "text": words})
        return [f for f in await device.until("command") if f["type"] == "command"][-1]["text"]

    assert "shortest allowed is 600s" in await ask("/every 5m ping")
    assert "/remind: when?" in await ask("/remind sometime soon")
    assert "unknown time zone" in await ask("/tz Mars/Olympus")
    assert "Europe/Berlin" in await ask("/tz Europe/Berlin")
    assert "Europe/Berlin" in await ask("/every day 08:00 summarise my inbox")
    assert "schedules.max_per_chat" in await ask("/remind in 1h stretch")
    listed = await ask("/schedules")
    assert "times in Europe/Berlin" in listed and "0 8 * * *" in listed
    schedule_id = listed.splitlines()[1].split()[0]
    assert await ask("/unschedule nope") == "no schedule 'nope' in this chat (see /schedules)"
    assert await ask(f"/unschedule {schedule_id}") == f"removed {schedule_id}"


async def test_a_scheduled_run_waits_for_a_turn_slot(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    """``server.max_turns`` bounds every turn: with the only slot taken by another chat's turn,
    a run that comes due starts its model call after that turn, not beside it."""
    server = await iris_server(streaming={"enabled": True}, server={"max_turns": 1})
    busy = await server.connect(chat_id="busy")
    device = await server.connect(chat_id="jobs")
    upstream.script(hold("working"), text("stretch now"))
    await device.send({"type": "message.send", "text": "/remind in 1s stretch"})
    await device.until("command")
    await busy.send({"type": "message.send", "text": "hi"})
    assert await asyncio.to_thread(upstream.gate_reached.wait, 10)
    # The run comes due now; beside the held turn its request would arrive within this window.
    with pytest.raises(AssertionError):
        await asyncio.to_thread(upstream.wait_for_request, 2, 3.0)
    released_at = time.monotonic()
    upstream.release()
    frames = await device.turn(within=15)
    stops = [f for f in frames if f["type"] == "message.stop"]
    assert stops[-1]["final_text"] == "stretch now"
    first, second = upstream.requests
    assert first.body["messages"][-1]["content"] == "hi"
    assert second.at > released_at

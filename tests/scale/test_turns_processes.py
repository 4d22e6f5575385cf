"""Turn ownership between two ``iris serve`` processes on one Redis: one running turn per chat,
a stop sent to the other process reaches the owner, a killed owner's turn is closed by the
survivor within the lease, and a Redis restarted mid-turn leaves the chat closed and working."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from tests.fakes.served import Served
from tests.fakes.upstream import FakeUpstream, gated, text
from tests.scale.across import (
    a_killed_owners_turn_is_closed_by_the_survivor_within_the_lease,
    closing,
    one_turn_per_chat_and_a_stop_on_the_other_process_reaches_the_owner,
)
from tests.scale.conftest import LEASE, RedisServer
from tests.scale.devices import device

pytestmark = pytest.mark.timeout(60)


async def follow(url: str, after_seq: int, within: float) -> list[dict[str, Any]]:
    """The chat's frames after ``after_seq`` until a turn ends, as an app gets them: it
    reconnects and resumes whenever the server closes on it."""
    got: list[dict[str, Any]] = []
    async with asyncio.timeout(within):
        while True:
            try:
                dev = await device(url, after_seq=after_seq)
            except (ConnectionClosed, OSError, AssertionError):
                await asyncio.sleep(0.2)  # the server is refusing while its store is away
                continue
            try:
                while True:
                    frame = await dev.recv(within)
                    if "seq" in frame and frame["type"] not in ("ready", "pong", "sync"):
                        got.append(frame)
                        after_seq = max(after_seq, frame["seq"])
                    if frame["type"] == "typing" and not frame["on"]:
                        await dev.close()
                        return got
            except ConnectionClosed:
                await asyncio.sleep(0.2)


async def test_redis_restarted_mid_turn_the_turn_ends_and_the_chat_works_again(
    two: list[tuple[Served, str]], upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    (owner, a_url), (_, b_url) = two
    upstream.script(gated("one ", "two ", "three", after=2), text("four"))
    on_a = await device(a_url)
    await on_a.send({"type": "message.send", "text": "count"})
    before = await on_a.until("message.update", text="one two ")
    redis_server.stop()  # a clean shutdown: what it acknowledged is on disk (AOF)
    upstream.release()  # the turn's next frames meet a store that is gone
    owner.wait_for("iris turn in main stopped")
    redis_server.start()

    rest = await follow(b_url, before[-1]["seq"], within=LEASE + 20)
    ended = closing(rest)
    assert [f["type"] for f in ended] == ["message.stop", "error", "typing"]
    assert ended[0]["final_text"] == "one two "  # what was logged before Redis went away
    # Closed by the first reaper there: the owner says why, another process that it was lost.
    assert ended[1]["code"] in ("store_unavailable", "owner_lost")
    # Nothing acknowledged was lost: the log replays the turn from the user's message on.
    replay = await follow(b_url, 0, within=10)
    assert [f["type"] for f in replay[:3]] == ["message", "typing", "message.start"]
    assert replay[0]["text"] == "count" and replay[-1]["seq"] == ended[-1]["seq"]

    # The chat works again: the next message streams.
    on_b = await device(b_url)
    await on_b.send({"type": "message.send", "text": "and then?"})
    frames = closing(await on_b.turn())
    assert frames[0]["final_text"] == "four"
    await on_b.close()


async def test_one_turn_per_chat_and_a_stop_on_the_other_process_reaches_the_owner(
    two: list[tuple[Served, str]], upstream: FakeUpstream
) -> None:
    await one_turn_per_chat_and_a_stop_on_the_other_process_reaches_the_owner(two, upstream)


async def test_a_killed_owners_turn_is_closed_by_the_survivor_within_the_lease(
    two: list[tuple[Served, str]], upstream: FakeUpstream
) -> None:
    await a_killed_owners_turn_is_closed_by_the_survivor_within_the_lease(two, upstream)

"""The line of chat messages waiting for a turn slot (``iris.surfaces.chat.line``)."""

from __future__ import annotations

import asyncio

import pytest

from iris.surfaces.chat.line import Line, Place
from iris.turn_slots import TurnLimiter, TurnSlot

pytestmark = pytest.mark.timeout(5)


def place(got: TurnSlot | Place | None) -> Place:
    assert isinstance(got, Place), got
    return got


async def test_a_slot_given_back_goes_to_the_first_in_line() -> None:
    turns = TurnLimiter(1)
    line = Line(turns, size=10)
    running = line.join("a", None)
    assert isinstance(running, TurnSlot)
    first, second = place(line.join("b", None)), place(line.join("c", None))
    assert (first.ahead(), second.ahead()) == (0, 1)
    running.release()
    slot = await first.wait()
    assert not second.granted.done() and second.ahead() == 0
    slot.release()
    (await second.wait()).release()
    assert turns.running == 0 and len(line) == 0


async def test_a_user_at_their_own_limit_does_not_hold_up_the_others() -> None:
    turns = TurnLimiter(2)
    line = Line(turns, size=10)
    mine = line.join("me", 1)
    other = line.join("other", 1)
    assert isinstance(mine, TurnSlot) and isinstance(other, TurnSlot)
    again = place(line.join("me", 1))  # over max_turns and over my own limit
    behind = place(line.join("you", 1))
    other.release()  # a slot is free, but I still run one: the next in line goes
    (await behind.wait()).release()
    assert not again.granted.done()
    mine.release()
    (await again.wait()).release()
    assert turns.running == 0


async def test_a_full_line_turns_the_message_away() -> None:
    turns = TurnLimiter(1)
    line = Line(turns, size=1)
    running = line.join("a", None)
    waiting = place(line.join("b", None))
    assert line.join("c", None) is None
    assert Line(turns, size=0).join("d", None) is None  # queue_size 0: busy at once
    waiting.leave()
    assert isinstance(running, TurnSlot)
    running.release()
    assert turns.running == 0


async def test_leaving_gives_back_a_slot_granted_but_never_taken() -> None:
    turns = TurnLimiter(1)
    line = Line(turns, size=10)
    running = line.join("a", None)
    assert isinstance(running, TurnSlot)
    waiting = place(line.join("b", None))
    behind = place(line.join("c", None))
    running.release()  # granted to ``waiting``, whose task is cancelled before it takes it
    assert waiting.granted.done()
    waiting.leave()
    (await behind.wait()).release()
    assert turns.running == 0


async def test_a_cancelled_wait_leaves_the_line() -> None:
    turns = TurnLimiter(1)
    line = Line(turns, size=10)
    running = line.join("a", None)
    assert isinstance(running, TurnSlot)
    waiting = place(line.join("b", None))
    task = asyncio.create_task(waiting.wait())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    waiting.leave()
    assert len(line) == 0
    running.release()
    assert turns.running == 0


async def test_a_closed_line_takes_no_more_slots() -> None:
    turns = TurnLimiter(1)
    line = Line(turns, size=10)
    running = line.join("a", None)
    assert isinstance(running, TurnSlot)
    waiting = place(line.join("b", None))
    line.close()
    assert waiting.granted.cancelled()
    running.release()
    assert turns.running == 0

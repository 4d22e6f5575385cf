"""The surfaces' one driver, on an injected clock and sleep: what it feeds, when it wakes the
planner, and how it ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from iris.surfaces.driver import drive

pytestmark = pytest.mark.timeout(10)


class FakeTime:
    """A clock that only moves when the driver sleeps; every sleep asked for is recorded."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


class Batcher:
    """A planner that shows fed text once ``hold`` seconds passed since it was fed."""

    def __init__(self, hold: float) -> None:
        self.hold = hold
        self.held: list[tuple[float, str]] = []
        self.shown: list[tuple[float, str]] = []
        self.time: FakeTime | None = None

    async def feed(self, event: str) -> bool:
        if event == "end":
            return True
        assert self.time is not None
        self.held.append((self.time.now, event))
        return False

    async def act(self, now: float) -> bool:
        if not self.held or now < self.held[0][0] + self.hold:
            return False
        self.shown.append((now, self.held.pop(0)[1]))
        return True

    def due(self, now: float) -> float | None:
        return self.held[0][0] + self.hold if self.held else None

    @property
    def settled(self) -> bool:
        return not self.held


async def events(*items: str) -> AsyncIterator[str]:
    for item in items:
        yield item


async def test_held_output_is_shown_at_its_due_time_on_the_injected_clock() -> None:
    time, planner = FakeTime(), Batcher(hold=1.5)
    planner.time = time
    await drive(events("a", "b", "end"), planner, clock=time.clock, sleep=time.sleep)
    # Both were fed at 0 and shown once 1.5 s passed; the driver slept exactly that long.
    assert planner.shown == [(1.5, "a"), (1.5, "b")]
    assert time.sleeps == [1.5]


async def test_nothing_after_the_last_event_is_read() -> None:
    read: list[str] = []

    async def tracked() -> AsyncIterator[str]:
        for item in ("a", "end", "after"):
            read.append(item)
            yield item
            await asyncio.sleep(0)

    time, planner = FakeTime(), Batcher(hold=0.0)
    planner.time = time
    await drive(tracked(), planner, clock=time.clock, sleep=time.sleep)
    assert planner.shown == [(0.0, "a")]
    assert "after" not in [text for _, text in planner.shown]


async def test_a_broken_event_stream_raises_its_own_error() -> None:
    async def broken() -> AsyncIterator[str]:
        yield "a"
        raise ValueError("the stream broke")

    time, planner = FakeTime(), Batcher(hold=10.0)
    planner.time = time
    with pytest.raises(ValueError, match="the stream broke"):  # not an ExceptionGroup
        await drive(broken(), planner, clock=time.clock, sleep=time.sleep)


async def test_events_ending_without_a_last_one_still_settle_the_planner() -> None:
    time, planner = FakeTime(), Batcher(hold=2.0)
    planner.time = time
    await drive(events("a"), planner, clock=time.clock, sleep=time.sleep)
    assert planner.shown == [(2.0, "a")]

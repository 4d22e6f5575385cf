"""The driver of a pure planner: its events fed as they come, and a wake-up at each due time.

A planner — the terminal's reply renderer, a chat reply under its throttle, the iris frame
encoder — decides from the events it was fed and the time what to show; it never waits. The
driver does the waiting for all of them, the same way:

- a reader task takes the events as fast as they come, so a slow screen or platform never
  slows the producer; events that arrive while the planner is busy are fed in order after;
- one loop feeds the planner every event that arrived, lets it ``act`` while something is due,
  and otherwise sleeps until the planner's ``due`` time or the next event, whichever is first.

The loop ends once the planner took its last event (``feed`` said so, or the events ran out)
and is ``settled``. Clock and sleep are injected, so a test runs the real loop on virtual time.
Both tasks live in one task group: if either fails, or the caller is cancelled, both stop.
"""

from __future__ import annotations

import asyncio
import collections
import math
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Generic, Protocol, TypeVar

from iris.tasks import task_group

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
E = TypeVar("E")
E_contra = TypeVar("E_contra", contravariant=True)


def loop_clock() -> float:
    """The event loop's clock: what ``asyncio.sleep`` counts in."""
    return asyncio.get_running_loop().time()


class Planner(Protocol[E_contra]):
    """What the driver feeds and wakes."""

    async def feed(self, event: E_contra) -> bool:
        """Take one event; True if it was the last one (the driver reads no further)."""
        ...

    async def act(self, now: float) -> bool:
        """Do what is due at ``now``; True if something was done (the driver asks again)."""
        ...

    def due(self, now: float) -> float | None:
        """When ``act`` will have something to do; None until an event changes that."""
        ...

    @property
    def settled(self) -> bool:
        """After the last event: nothing is left to do."""
        ...


async def drive(
    events: AsyncIterable[E],
    planner: Planner[E],
    *,
    clock: Clock = loop_clock,
    sleep: Sleep = asyncio.sleep,
) -> None:
    """Feed ``planner`` every event of ``events`` and wake it at its due times until it is
    settled after its last event. A failure of the events or the planner is raised as is."""
    await _Driver(planner, clock, sleep).run(events)


class _Driver(Generic[E]):
    def __init__(self, planner: Planner[E], clock: Clock, sleep: Sleep) -> None:
        self.planner = planner
        self.clock = clock
        self.sleep = sleep
        self.inbox: collections.deque[E] = collections.deque()
        self.wake = asyncio.Event()
        self.read_all = False  # the events ran out

    async def run(self, events: AsyncIterable[E]) -> None:
        async with task_group() as group:
            reader = group.create_task(self._read(events))
            alarm = _Alarm(group, self.sleep, self.wake)
            try:
                await self._loop(reader, alarm)
            finally:
                # Past the planner's last event nothing more is read; a sleep still set is moot.
                reader.cancel()
                alarm.stop()

    async def _read(self, events: AsyncIterable[E]) -> None:
        try:
            async for event in events:
                self.inbox.append(event)
                self.wake.set()
        finally:
            self.read_all = True
            self.wake.set()

    async def _loop(self, reader: asyncio.Task[None], alarm: _Alarm) -> None:
        planner, inbox = self.planner, self.inbox
        ended = False
        while True:
            # Cleared before anything is looked at: whatever happens from here on wakes the wait.
            self.wake.clear()
            while inbox and not ended:
                if await planner.feed(inbox.popleft()):
                    ended = True
                    reader.cancel()  # nothing after the last event is read
                    inbox.clear()
            ended = ended or (self.read_all and not inbox)
            now = self.clock()
            if await planner.act(now):
                continue
            if ended and planner.settled:
                return
            if inbox:
                continue  # events came in while the planner acted
            due = planner.due(now)
            if due is not None:
                alarm.set(due, max(0.0, due - now))
            await self.wake.wait()


class _Alarm:
    """One sleeping task that wakes the loop at the earliest due time asked for.

    A due time that moves later keeps the sleep (the loop wakes early, finds nothing due and
    sets the alarm again); only an earlier one replaces it. Every event may move the due time,
    and most move it later, so this is a task per wake-up, not per event."""

    def __init__(self, group: asyncio.TaskGroup, sleep: Sleep, wake: asyncio.Event) -> None:
        self.group, self.sleep, self.wake = group, sleep, wake
        self.task: asyncio.Task[None] | None = None
        self.at = math.inf

    def set(self, at: float, delay: float) -> None:
        if self.task is not None and not self.task.done():
            if at >= self.at:
                return
            self.task.cancel()
        self.at = at
        self.task = self.group.create_task(self._ring(delay))

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def _ring(self, delay: float) -> None:
        await self.sleep(delay)
        self.wake.set()

"""Task lifetimes: the task group every part of Iris runs its concurrent work in.

Every task belongs to an ``asyncio.TaskGroup`` owned by what it serves (a turn, an exchange, a
connection, a room, the app): leaving the group's ``async with`` cancels and awaits whatever
is still running, so nothing outlives its owner. ``task_group`` is that group, with one rule
added: a group that failed for a single reason raises that exception itself, not an
``ExceptionGroup`` of one, so callers keep catching ``StoreUnavailable`` or a provider error as
before.

Where an owner's work does not fit one block (started by one call and ended by another, or a
task that must outlive a cancelled caller), a ``Supervisor`` owns the tasks instead: it holds
each until it ends, and its owner's ``close`` ends and awaits every one still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Coroutine
from types import TracebackType
from typing import Any, TypeVar

_T = TypeVar("_T")


@contextlib.asynccontextmanager
async def task_group() -> AsyncGenerator[asyncio.TaskGroup]:
    """An ``asyncio.TaskGroup`` that raises a lone failure as itself."""
    try:
        async with asyncio.TaskGroup() as group:
            yield group
    except BaseExceptionGroup as failed:
        if len(failed.exceptions) == 1:
            raise failed.exceptions[0] from None
        raise


async def logged(work: Coroutine[Any, Any, None], what: str) -> None:
    """Run ``work``; log its failure instead of raising it.

    For a child of a long-lived group (a surface's, from start to stop): a child that raises
    cancels its group and the group's owner, and one message's bug must not end every chat."""
    try:
        await work
    except Exception:
        logging.getLogger(__name__).exception("%s failed", what)


class OpenGroup:
    """A task group held open across two calls, for an owner whose lifetime is not one block:
    ``open`` in its ``__aenter__`` or ``start``, ``close`` in its ``__aexit__`` or ``stop``
    (the same task both times, as a ``TaskGroup`` needs)."""

    def __init__(self) -> None:
        self._group: asyncio.TaskGroup | None = None
        self._held: contextlib.AsyncExitStack | None = None

    async def open(self) -> None:
        async with contextlib.AsyncExitStack() as stack:
            self._group = await stack.enter_async_context(task_group())
            self._held = stack.pop_all()

    def create_task(
        self, work: Coroutine[Any, Any, _T], *, name: str | None = None
    ) -> asyncio.Task[_T]:
        if self._group is None:
            raise RuntimeError("the task group is not open")
        return self._group.create_task(work, name=name)

    async def close(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        """Wait for every task (cancel first what must not be waited for); an exception
        passed in is the owner's, raised on with the group's."""
        held, self._held, self._group = self._held, None, None
        if held is not None:
            await held.__aexit__(exc_type, exc, tb)


class Supervisor:
    """The tasks of one owner whose lifetime is not one block, held until each ends.

    Unlike a task group, a task's failure ends nothing else (its owner reads its result, or
    ``close`` collects it), and tasks may start in one task and be awaited in another."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def create_task(
        self, work: Coroutine[Any, Any, _T], *, name: str | None = None
    ) -> asyncio.Task[_T]:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def __len__(self) -> int:
        return len(self._tasks)

    async def wait(self) -> None:
        """Until every task running now has ended."""
        if self._tasks:
            await asyncio.wait(set(self._tasks))

    async def close(self, grace: float = 0.0) -> None:
        """End every task: those still running after ``grace`` seconds are cancelled; all are
        awaited, their failures collected (each owner logs its own)."""
        tasks = set(self._tasks)
        if not tasks:
            return
        late = tasks
        if grace > 0:
            _, late = await asyncio.wait(tasks, timeout=grace)
        for task in late:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def stop_if_cancelled() -> None:
    """Raise a cancellation the awaited call lost. redis-py's asyncio client sends each
    command under ``asyncio.wait_for``, which on Python 3.11 returns the result when the
    result and the cancellation arrive in the same turn of the loop (redis/redis-py#2028): a
    loop that goes on around it would keep a stopping server waiting for ever. Every loop
    that calls the store for as long as the server runs calls this after each call."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class Silence:
    """``asyncio.timeout`` for the gap between two events of a stream, cheap per event.

    ``async with Silence(seconds) as silence:`` raises ``TimeoutError`` when ``seconds`` pass
    without a ``silence.seen()`` (from entering, or from the last one). Rescheduling an
    ``asyncio.timeout`` per event cancels a timer and makes a new one, for every chunk of
    every stream; ``seen()`` stores the time instead, and the one timer, when it fires, moves
    itself to the last event's deadline until that one passes. ``None``: no deadline."""

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()
        self._timeout = asyncio.timeout(None)
        self._timer: asyncio.TimerHandle | None = None
        self._held = False

    def seen(self) -> None:
        self._last = self._loop.time()

    def hold(self) -> None:
        """No deadline until ``release()``: the stream is not being read meanwhile."""
        self._held = True

    def release(self) -> None:
        """The deadline counts again, from now."""
        self._held = False
        self._last = self._loop.time()

    def expired(self) -> bool:
        """The deadline passed (the ``TimeoutError`` is this one's, not an inner one's)."""
        return self._timeout.expired()

    async def __aenter__(self) -> Silence:
        await self._timeout.__aenter__()
        if self._seconds is not None:
            self._timer = self._loop.call_at(self._last + self._seconds, self._check)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if self._timer is not None:
            self._timer.cancel()
        return await self._timeout.__aexit__(exc_type, exc, tb)

    def _check(self) -> None:
        assert self._seconds is not None
        now = self._loop.time()
        due = now + self._seconds if self._held else self._last + self._seconds
        if now + 0.001 < due:  # timers may fire up to a millisecond early (uvloop)
            self._timer = self._loop.call_at(due, self._check)
        else:
            self._timer = None
            self._timeout.reschedule(now)  # due now: the task is cancelled, TimeoutError

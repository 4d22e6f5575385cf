"""An asyncio event loop on virtual time: when every task waits, the clock jumps to the next timer.

Real code runs unchanged on it — ``loop.time()``, ``asyncio.sleep``, ``asyncio.timeout`` — but a
30-second cadence takes no wall time and every run is exact and repeatable. The loop only jumps
when nothing is ready and no socket has data; a wait with no timer at all (a deadlock on virtual
time) raises instead of blocking for ever. Run a coroutine with ``run_virtual(coro)``.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _Now:
    value = 0.0


class _JumpingSelector(selectors.DefaultSelector):
    def __init__(self, now: _Now) -> None:
        super().__init__()
        self.now = now

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            raise RuntimeError("stuck on virtual time: every task waits and no timer is set")
        self.now.value += timeout  # what a real select would have slept
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._virtual = _Now()
        super().__init__(_JumpingSelector(self._virtual))

    def time(self) -> float:
        return self._virtual.value


def run_virtual(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=VirtualLoop) as runner:
        return runner.run(coro)

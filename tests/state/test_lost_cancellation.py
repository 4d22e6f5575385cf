"""A loop that reads the store for as long as the server runs stops when it is cancelled, even
when the store call it was in returned instead of raising the cancellation.

That is what redis-py's asyncio client does at the wrong moment (redis/redis-py#2028): it sends
each command under ``asyncio.wait_for`` (the ``socket_timeout``), and on Python 3.11
``wait_for`` returns the result when the result and the cancellation arrive in the same turn of
the loop. A loop that goes on around it keeps a stopping server waiting for ever: seen as a
30 s hang of ``iris serve``'s shutdown (the scheduler's loop) in ``tests/scale``. Each test
here makes the store call's answer arrive as the cancellation comes, through ``wait_for``
itself, and gives the stop 5 s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from iris.config import SchedulesConfig
from iris.state.lease import Lease
from iris.state.redis_store import RedisStore
from iris.state.schedules import Schedule, SqliteSchedules
from iris.state.sqlite import Store
from iris.surfaces.scheduler import Scheduler
from iris.surfaces.socket.access import Revocations

pytestmark = pytest.mark.timeout(60)


class Reply:
    """A store call in flight whose answer the test delivers (``arrive``), through
    ``asyncio.wait_for`` as redis-py sends a command."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self._answer: asyncio.Future[Any] | None = None

    async def __call__(self) -> Any:
        self._answer = asyncio.get_running_loop().create_future()
        self.asked.set()
        return await asyncio.wait_for(self._answer, 30)

    def arrive(self, value: Any) -> None:
        assert self._answer is not None
        self._answer.set_result(value)


class RepliedSchedules(SqliteSchedules):
    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.reply = Reply()

    async def due(self, now: float, limit: int = 100) -> list[Schedule]:
        return await self.reply()


async def test_the_scheduler_stops_though_its_store_read_lost_the_cancellation(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "iris.db")
    schedules = RepliedSchedules(store)
    scheduler = Scheduler(schedules, SchedulesConfig(), {}, poll=0.01)
    try:
        await scheduler.start()
        await schedules.reply.asked.wait()
        schedules.reply.arrive([])  # nothing due: the answer comes as the server stops
        await asyncio.wait_for(scheduler.stop(), 5)
    finally:
        store.close()


class RepliedDevices:
    def __init__(self) -> None:
        self.reply = Reply()

    async def revoked(self, digests: Collection[str]) -> set[str]:
        return await self.reply()


async def test_the_revocation_sweep_stops_though_its_store_read_lost_the_cancellation() -> None:
    devices = RepliedDevices()
    revocations = Revocations(devices)  # pyright: ignore[reportArgumentType]
    revocations.watch("a-device", lambda: asyncio.sleep(0))
    sweeping = asyncio.create_task(revocations.run(every=0.01))
    await devices.reply.asked.wait()
    devices.reply.arrive(set())  # nothing revoked
    sweeping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(sweeping, 5)


class RepliedLease(Lease):
    def __init__(self) -> None:
        super().__init__(RedisStore("redis://127.0.0.1:9/0"), "iris:lease:test", 0.03)
        self.reply = Reply()

    async def renew(self) -> bool:
        return await self.reply()


async def test_a_kept_lease_stops_renewing_though_its_renewal_lost_the_cancellation() -> None:
    lease = RepliedLease()
    lost: list[bool] = []
    try:
        keeping = asyncio.create_task(lease.keep(lambda: lost.append(True)))
        await lease.reply.asked.wait()
        lease.reply.arrive(True)  # renewed, as the owner lets it go
        keeping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(keeping, 5)
        assert lost == []
    finally:
        await lease.store.aclose()

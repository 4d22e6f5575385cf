"""A named lease one process holds at a time, renewed while held, lost when its holder dies.

``SET key token NX PX ttl`` takes it; renewing and releasing are compare-and-set scripts, so a
holder whose lease expired (a long pause, a partition) can neither extend nor delete the lease
another process has taken since. ``keep`` renews every third of the lease and calls
``on_lost`` once when the lease is gone or cannot be renewed before it would expire: the holder
must then stop acting as the owner (the new owner may already be closing what it left).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable

from iris.errors import StoreUnavailable
from iris.state.redis_store import DELETE_IF_HELD, ERRORS, RedisStore
from iris.tasks import stop_if_cancelled

log = logging.getLogger(__name__)

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


class Lease:
    """The lease ``key``: at most one holder at a time, for ``ttl`` seconds unless renewed."""

    def __init__(self, store: RedisStore, key: str, ttl: float) -> None:
        self.store = store
        self.key = key
        self.ttl = ttl
        # The value in Redis: the process (readable by ``holder``) and this lease's own token.
        self.token = f"{store.process_id}/{uuid.uuid4().hex[:8]}"
        self._renew = store.aio.register_script(_RENEW)
        self._release = store.aio.register_script(DELETE_IF_HELD)

    @property
    def _ms(self) -> int:
        return max(1, int(self.ttl * 1000))

    async def acquire(self) -> bool:
        """Take the lease if nobody holds it (or this lease already does)."""
        if await self.store.aio.set(self.key, self.token, nx=True, px=self._ms):
            return True
        return await self.renew()

    async def renew(self) -> bool:
        """Extend the lease; False if this process no longer holds it."""
        return bool(await self._renew(keys=[self.key], args=[self.token, self._ms]))

    async def release(self) -> None:
        """Give the lease up (only if still held: never deletes another holder's)."""
        await self._release(keys=[self.key], args=[self.token])

    async def holder(self) -> str | None:
        """The token of whoever holds the lease now (``process_id/…``), or None."""
        value = await self.store.aio.get(self.key)
        return value if isinstance(value, str) else None

    async def keep(self, on_lost: Callable[[], None]) -> None:
        """Renew until cancelled; call ``on_lost`` once if the lease is lost or runs out."""
        expires = time.monotonic() + self.ttl
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                renewed = await self.renew()
                stop_if_cancelled()  # its owner let it go as it was renewed
                if renewed:
                    expires = time.monotonic() + self.ttl
                    continue
                log.warning("lease %s was taken over", self.key)
            except ERRORS as exc:
                if time.monotonic() < expires - self.ttl / 3:
                    continue  # Redis is briefly away: the lease still runs; try again
                log.warning("lease %s could not be renewed: %s", self.key, exc)
            on_lost()
            return


def holder_process(token: str | None) -> str | None:
    """The process id part of a lease token."""
    return None if token is None else token.rsplit("/", 1)[0]


class LeaseLost(StoreUnavailable):
    """This process acted as a lease's holder after losing it (a write fenced by the lease was
    refused): whatever it was doing as the owner must stop; the new owner closes it."""

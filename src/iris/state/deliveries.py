"""Which webhook deliveries were taken already, so a platform's redelivery is answered once.

Meta redelivers a WhatsApp event that was not answered 200 in time (for days), and a load
balancer may hand the redelivery to another process than the first. ``Deliveries.first(key)``
is true for the first delivery of ``key`` within ``ttl`` seconds, false for every later one,
across restarts and processes where the store allows:

- ``SqliteDeliveries``: the SQLite file (one process; survives a restart);
- ``RedisDeliveries``: with a shared store (``store.url``), one ``SET NX`` per key with the
  ttl as its expiry: two processes taking the same delivery at once agree on one;
- ``MemoryDeliveries``: this process alone, the newest ``MEMORY_KEYS`` keys (a platform built
  outside a server).

A platform refuses events older than its window first (WhatsApp's ``max_age``); the ttl only
has to outlive that window, so the kept keys stay bounded by the traffic of one window.
"""

from __future__ import annotations

import collections
import sqlite3
import time
from collections.abc import Callable
from typing import Protocol

from iris.state.redis_store import RedisStore, translated
from iris.state.sqlite import Store, transaction

MEMORY_KEYS = 10_000

_DDL = """
CREATE TABLE IF NOT EXISTS deliveries (key TEXT PRIMARY KEY, expires REAL NOT NULL);
CREATE INDEX IF NOT EXISTS deliveries_expires ON deliveries (expires);
"""


class Deliveries(Protocol):
    async def first(self, key: str, ttl: float) -> bool:
        """Is this the first delivery of ``key`` in ``ttl`` seconds? (It is now taken.)"""
        ...


class MemoryDeliveries:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: collections.OrderedDict[str, float] = collections.OrderedDict()

    async def first(self, key: str, ttl: float) -> bool:
        now = self._clock()
        expires = self._seen.get(key)
        if expires is not None and expires > now:
            return False
        self._seen[key] = now + ttl
        self._seen.move_to_end(key)
        while len(self._seen) > MEMORY_KEYS:
            self._seen.popitem(last=False)
        return True


class SqliteDeliveries:
    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock
        store.ensure_schema(_DDL)

    async def first(self, key: str, ttl: float) -> bool:
        now = self._clock()

        def take(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                conn.execute("DELETE FROM deliveries WHERE expires <= ?", (now,))
                taken = conn.execute(
                    "INSERT OR IGNORE INTO deliveries (key, expires) VALUES (?, ?)",
                    (key, now + ttl),
                )
                return taken.rowcount == 1

        return await self._store.run(take)


class RedisDeliveries:
    def __init__(self, store: RedisStore) -> None:
        self._store = store

    async def first(self, key: str, ttl: float) -> bool:
        with translated(self._store.url):
            taken = await self._store.aio.set(
                self._store.key("delivery", key), "1", nx=True, px=max(int(ttl * 1000), 1)
            )
        return bool(taken)


def deliveries_for(store: Store, shared: RedisStore | None) -> Deliveries:
    """The SQLite file, or with a shared store (``store.url``) Redis, which every process reads."""
    return SqliteDeliveries(store) if shared is None else RedisDeliveries(shared)

"""Which chat threads the bot answered in: a follow-up there needs no mention, after a restart
too.

A thread is a chat platform conversation's key (``telegram:-100…:topic=7``). The chat surface
marks it when the bot answered there (a reply or a command's answer) and asks when a message in
a group names no one. ``SqliteThreads`` keeps the keys in the SQLite file (table
``iris_threads``); with a shared store (``store.url``) ``RedisThreads`` keeps one key per thread
(``{chat:<key>}:answered``, beside the chat's approval keys), so a follow-up that lands on another process needs no mention
either. A mark lasts ``KEPT_S`` after the bot's last answer there: a thread quiet that long
wants a mention again, and the store does not grow with every thread ever answered.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Protocol

from iris.state.redis_store import RedisStore, translated
from iris.state.sqlite import Store, transaction

KEPT_S = 30 * 24 * 3600  # a thread the bot answered in stays "its" this long after the last answer

_DDL = """
CREATE TABLE IF NOT EXISTS iris_threads (
    key TEXT PRIMARY KEY,
    answered_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS iris_threads_answered_at ON iris_threads (answered_at);
"""


class Threads(Protocol):
    async def answered(self, key: str) -> bool:
        """Did the bot answer in thread ``key`` within ``KEPT_S``?"""
        ...

    async def mark(self, key: str) -> None:
        """The bot answered in thread ``key`` now."""
        ...


class SqliteThreads:
    def __init__(self, store: Store, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock
        store.ensure_schema(_DDL)

    async def answered(self, key: str) -> bool:
        since = self._clock() - KEPT_S

        def read(conn: sqlite3.Connection) -> bool:
            query = "SELECT 1 FROM iris_threads WHERE key=? AND answered_at>=?"
            return conn.execute(query, (key, since)).fetchone() is not None

        return await self._store.run(read, write=False)

    async def mark(self, key: str) -> None:
        now = self._clock()

        def write(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.execute(
                    "INSERT INTO iris_threads (key, answered_at) VALUES (?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET answered_at=excluded.answered_at",
                    (key, now),
                )
                conn.execute("DELETE FROM iris_threads WHERE answered_at<?", (now - KEPT_S,))

        await self._store.run(write)


class RedisThreads:
    def __init__(self, store: RedisStore) -> None:
        self._store = store

    def _key(self, key: str) -> str:
        return self._store.chat_key(key, "answered")

    async def answered(self, key: str) -> bool:
        with translated(self._store.url):
            return bool(await self._store.aio.exists(self._key(key)))

    async def mark(self, key: str) -> None:
        with translated(self._store.url):
            await self._store.aio.set(self._key(key), "1", ex=KEPT_S)


def threads_for(store: Store, shared: RedisStore | None) -> Threads:
    """The SQLite store, or with a shared store (``store.url``) its Redis twin."""
    return SqliteThreads(store) if shared is None else RedisThreads(shared)

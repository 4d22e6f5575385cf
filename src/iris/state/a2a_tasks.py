"""A2A tasks and their push callbacks, as JSON text: what any process serves ``tasks/get`` from.

The A2A server (``iris.surfaces.a2a``) keeps each task it runs here, as the protocol's JSON,
after every change, and each task's push notification configs beside it. The store sees plain
text keyed by ids; the SDK's types are the surface's business.

``A2aTasks`` is what both stores offer: ``SqliteA2aTasks`` in the SQLite file,
``RedisA2aTasks`` in the shared store (``store.url``); ``a2a_tasks_for`` picks one.

**In Redis**: ``a2a:task:<id>`` the task's JSON (a string); ``a2a:context:<context_id>`` a
sorted set of its tasks' ids scored by when each last changed (``a2a:context:`` the
``LISTED`` newest of every context); ``a2a:push:<task_id>`` a hash
of push config id -> config JSON. Every key expires ``KEPT_S`` after its last write (SQLite
keeps its rows as it keeps stored responses).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Protocol, cast

from iris.state.redis_store import RedisStore, translated
from iris.state.sqlite import Store, transaction

KEPT_S = 30 * 24 * 3600  # a task in Redis outlives its last change by this long
LISTED = 1000  # tasks the Redis index of every task keeps (the newest)

_DDL = """
CREATE TABLE IF NOT EXISTS a2a_tasks (
    id TEXT PRIMARY KEY,
    context_id TEXT NOT NULL,
    task TEXT NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS a2a_tasks_context ON a2a_tasks (context_id, updated);
CREATE TABLE IF NOT EXISTS a2a_push_configs (
    task_id TEXT NOT NULL,
    id TEXT NOT NULL,
    config TEXT NOT NULL,
    PRIMARY KEY (task_id, id)
);
"""


class A2aTasks(Protocol):
    """Tasks by id (JSON text) and their push configs."""

    async def save(self, task_id: str, context_id: str, task: str) -> None: ...

    async def get(self, task_id: str) -> str | None: ...

    async def delete(self, task_id: str) -> None: ...

    async def recent(self, context_id: str | None, limit: int) -> list[str]: ...

    async def set_push(self, task_id: str, config_id: str, config: str) -> None: ...

    async def pushes(self, task_id: str) -> dict[str, str]: ...

    async def drop_push(self, task_id: str, config_id: str | None) -> None: ...


class SqliteA2aTasks:
    """Every method runs on the store's thread; a locked or lost database raises
    ``StoreUnavailable``."""

    def __init__(self, store: Store) -> None:
        self._store = store
        store.ensure_schema(_DDL)

    async def save(self, task_id: str, context_id: str, task: str) -> None:
        row = (task_id, context_id, task, time.time())

        def write(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.execute(
                    "INSERT OR REPLACE INTO a2a_tasks (id, context_id, task, updated) "
                    "VALUES (?, ?, ?, ?)",
                    row,
                )

        await self._store.run(write)

    async def get(self, task_id: str) -> str | None:
        row = await self._store.run(
            lambda conn: conn.execute(
                "SELECT task FROM a2a_tasks WHERE id=?", (task_id,)
            ).fetchone(),
            write=False,
        )
        return None if row is None else str(row[0])

    async def delete(self, task_id: str) -> None:
        def write(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.execute("DELETE FROM a2a_tasks WHERE id=?", (task_id,))
                conn.execute("DELETE FROM a2a_push_configs WHERE task_id=?", (task_id,))

        await self._store.run(write)

    async def recent(self, context_id: str | None, limit: int) -> list[str]:
        """The newest ``limit`` tasks (of ``context_id`` when given), newest first."""
        where, args = ("WHERE context_id=?", (context_id,)) if context_id else ("", ())
        rows = await self._store.run(
            lambda conn: conn.execute(
                f"SELECT task FROM a2a_tasks {where} ORDER BY updated DESC LIMIT ?",
                (*args, limit),
            ).fetchall(),
            write=False,
        )
        return [str(r[0]) for r in rows]

    async def set_push(self, task_id: str, config_id: str, config: str) -> None:
        def write(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.execute(
                    "INSERT OR REPLACE INTO a2a_push_configs (task_id, id, config) "
                    "VALUES (?, ?, ?)",
                    (task_id, config_id, config),
                )

        await self._store.run(write)

    async def pushes(self, task_id: str) -> dict[str, str]:
        rows = await self._store.run(
            lambda conn: conn.execute(
                "SELECT id, config FROM a2a_push_configs WHERE task_id=? ORDER BY id",
                (task_id,),
            ).fetchall(),
            write=False,
        )
        return {str(r[0]): str(r[1]) for r in rows}

    async def drop_push(self, task_id: str, config_id: str | None) -> None:
        """Forget one push config of the task (every one, with ``config_id`` None)."""

        def write(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                if config_id is None:
                    conn.execute("DELETE FROM a2a_push_configs WHERE task_id=?", (task_id,))
                else:
                    conn.execute(
                        "DELETE FROM a2a_push_configs WHERE task_id=? AND id=?",
                        (task_id, config_id),
                    )

        await self._store.run(write)


class RedisA2aTasks:
    """The same in the shared store; every Redis failure is ``StoreUnavailable``."""

    def __init__(self, store: RedisStore) -> None:
        self._store = store

    def _task(self, task_id: str) -> str:
        return self._store.key("a2a", "task", task_id)

    def _context(self, context_id: str) -> str:
        return self._store.key("a2a", "context", context_id)

    def _push(self, task_id: str) -> str:
        return self._store.key("a2a", "push", task_id)

    async def save(self, task_id: str, context_id: str, task: str) -> None:
        aio = self._store.aio
        with translated(self._store.url):
            await aio.set(self._task(task_id), task, ex=KEPT_S)
            # Its own slot in a cluster: written after the task, so an id listed is readable.
            now = time.time()
            for index in (self._context(context_id), self._context("")):
                await aio.zadd(index, {task_id: now})
                await aio.expire(index, KEPT_S)
            await aio.zremrangebyrank(self._context(""), 0, -LISTED - 1)

    async def get(self, task_id: str) -> str | None:
        with translated(self._store.url):
            found = await self._store.aio.get(self._task(task_id))
        return None if found is None else cast(str, found)

    async def delete(self, task_id: str) -> None:
        with translated(self._store.url):
            await self._store.aio.delete(self._task(task_id))
            await self._store.aio.delete(self._push(task_id))

    async def recent(self, context_id: str | None, limit: int) -> list[str]:
        """The newest ``limit`` tasks of ``context_id`` (without one, of the ``LISTED``
        newest of all)."""
        aio = self._store.aio
        with translated(self._store.url):
            index = self._context(context_id or "")
            ids = cast(list[str], await aio.zrevrange(index, 0, limit - 1))
            found = [await aio.get(self._task(i)) for i in ids]
        return [cast(str, t) for t in found if t is not None]

    async def set_push(self, task_id: str, config_id: str, config: str) -> None:
        with translated(self._store.url):
            await self._store.aio.hset(self._push(task_id), config_id, config)
            await self._store.aio.expire(self._push(task_id), KEPT_S)

    async def pushes(self, task_id: str) -> dict[str, str]:
        with translated(self._store.url):
            found = await self._store.aio.hgetall(self._push(task_id))
        return dict(sorted(cast(dict[str, str], found).items()))

    async def drop_push(self, task_id: str, config_id: str | None) -> None:
        with translated(self._store.url):
            if config_id is None:
                await self._store.aio.delete(self._push(task_id))
            else:
                await self._store.aio.hdel(self._push(task_id), config_id)


def a2a_tasks_for(store: Store, shared: RedisStore | None) -> A2aTasks:
    """The SQLite store, or with a shared store (``store.url``) its Redis twin."""
    return SqliteA2aTasks(store) if shared is None else RedisA2aTasks(shared)

"""Stored conversations: the Conversations API's objects and their items, in order.

A conversation is ``{"id": "conv_…", "object": "conversation", "created_at", "metadata"}``;
its items are Responses-format items (messages, function calls and their outputs, reasoning),
oldest first, each with its own id. ``/v1/responses`` with ``conversation`` reads them as the
model's history and appends the turn's input and output items.

``Conversations`` is what both stores offer: ``SqliteConversations`` in the SQLite file,
``RedisConversations`` in the shared store (``store.url``); ``conversations_for`` picks one.

**In Redis** (``RedisConversations``), per conversation, two keys (named by ``conversation_keys`` alone, so a rename is one edit; both
carry the conversation id as one hash tag, so a Redis Cluster keeps them in one slot for the
``MULTI`` that writes them together):

- the object, a string (JSON);
- its items, a list of JSON items, oldest first.

Like stored responses they never expire: size Redis for them (docs/deploy.md).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Protocol, cast

from iris.state.redis_store import RedisStore, translated
from iris.state.sqlite import Store, transaction

Json = dict[str, Any]

_DDL = """
CREATE TABLE IF NOT EXISTS api_conversations (
    id TEXT PRIMARY KEY,
    conversation TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS api_conversation_items (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL,
    id TEXT NOT NULL,
    item TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS api_conversation_items_order
    ON api_conversation_items (conversation_id, seq);
"""


class Conversations(Protocol):
    """``SqliteConversations`` (SQLite) or ``RedisConversations``."""

    async def create(self, conversation: Json, items: list[Json]) -> None: ...

    async def get(self, conversation_id: str) -> Json | None: ...

    async def update(self, conversation: Json) -> None:
        """Replace a stored conversation's object (its metadata)."""
        ...

    async def delete(self, conversation_id: str) -> bool: ...

    async def items(self, conversation_id: str) -> list[Json] | None:
        """Its items, oldest first; None when there is no such conversation."""
        ...

    async def append(self, conversation_id: str, items: list[Json]) -> bool:
        """Add ``items`` at the end; False when there is no such conversation."""
        ...

    async def delete_item(self, conversation_id: str, item_id: str) -> bool: ...


class SqliteConversations:
    """Every method runs on the store's thread; a locked or lost database raises
    ``StoreUnavailable`` (503)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        store.ensure_schema(_DDL)

    async def create(self, conversation: Json, items: list[Json]) -> None:
        def write(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.execute(
                    "INSERT INTO api_conversations (id, conversation) VALUES (?, ?)",
                    (conversation["id"], json.dumps(conversation)),
                )
                _insert(conn, conversation["id"], items)

        await self._store.run(write)

    async def get(self, conversation_id: str) -> Json | None:
        row = await self._store.run(
            lambda conn: conn.execute(
                "SELECT conversation FROM api_conversations WHERE id=?", (conversation_id,)
            ).fetchone(),
            write=False,
        )
        return None if row is None else json.loads(row[0])

    async def update(self, conversation: Json) -> None:
        await self._store.run(
            lambda conn: conn.execute(
                "UPDATE api_conversations SET conversation=? WHERE id=?",
                (json.dumps(conversation), conversation["id"]),
            )
        )

    async def delete(self, conversation_id: str) -> bool:
        def remove(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                gone = conn.execute("DELETE FROM api_conversations WHERE id=?", (conversation_id,))
                conn.execute(
                    "DELETE FROM api_conversation_items WHERE conversation_id=?",
                    (conversation_id,),
                )
                return gone.rowcount > 0

        return await self._store.run(remove)

    async def items(self, conversation_id: str) -> list[Json] | None:
        def read(conn: sqlite3.Connection) -> list[Json] | None:
            if not _exists(conn, conversation_id):
                return None
            rows = conn.execute(
                "SELECT item FROM api_conversation_items WHERE conversation_id=? ORDER BY seq",
                (conversation_id,),
            ).fetchall()
            return [json.loads(row[0]) for row in rows]

        return await self._store.run(read, write=False)

    async def append(self, conversation_id: str, items: list[Json]) -> bool:
        def write(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                if not _exists(conn, conversation_id):
                    return False
                _insert(conn, conversation_id, items)
                return True

        return await self._store.run(write)

    async def delete_item(self, conversation_id: str, item_id: str) -> bool:
        def remove(conn: sqlite3.Connection) -> bool:
            gone = conn.execute(
                "DELETE FROM api_conversation_items WHERE conversation_id=? AND id=?",
                (conversation_id, item_id),
            )
            return gone.rowcount > 0

        return await self._store.run(remove)


def _exists(conn: sqlite3.Connection, conversation_id: str) -> bool:
    found = conn.execute("SELECT 1 FROM api_conversations WHERE id=?", (conversation_id,))
    return found.fetchone() is not None


def _insert(conn: sqlite3.Connection, conversation_id: str, items: list[Json]) -> None:
    conn.executemany(
        "INSERT INTO api_conversation_items (conversation_id, id, item) VALUES (?, ?, ?)",
        [(conversation_id, item["id"], json.dumps(item)) for item in items],
    )


def conversation_keys(store: RedisStore, conversation_id: str) -> tuple[str, str]:
    """(the object's key, the items' key) of one conversation."""
    tagged = "{" + conversation_id + "}"
    return store.key("conversation", tagged), store.key("conversation", tagged, "items")


class RedisConversations:
    def __init__(self, store: RedisStore) -> None:
        self._store = store

    async def create(self, conversation: Json, items: list[Json]) -> None:
        head, listed = conversation_keys(self._store, conversation["id"])
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.set(head, json.dumps(conversation))
                if items:
                    pipe.rpush(listed, *(json.dumps(item) for item in items))
                await pipe.execute()

    async def get(self, conversation_id: str) -> Json | None:
        head, _ = conversation_keys(self._store, conversation_id)
        with translated(self._store.url):
            raw = cast(str | None, await self._store.aio.get(head))
        return None if raw is None else json.loads(raw)

    async def update(self, conversation: Json) -> None:
        head, _ = conversation_keys(self._store, conversation["id"])
        with translated(self._store.url):
            await self._store.aio.set(head, json.dumps(conversation), xx=True)

    async def delete(self, conversation_id: str) -> bool:
        head, listed = conversation_keys(self._store, conversation_id)
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.delete(head)
                pipe.delete(listed)
                removed = cast(list[int], await pipe.execute())
        return bool(removed[0])

    async def items(self, conversation_id: str) -> list[Json] | None:
        head, listed = conversation_keys(self._store, conversation_id)
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.exists(head)
                pipe.lrange(listed, 0, -1)
                exists, rows = cast(tuple[int, list[str]], tuple(await pipe.execute()))
        return None if not exists else [json.loads(row) for row in rows]

    async def append(self, conversation_id: str, items: list[Json]) -> bool:
        head, listed = conversation_keys(self._store, conversation_id)
        with translated(self._store.url):
            if not await self._store.aio.exists(head):
                return False
            if items:
                await self._store.aio.rpush(listed, *(json.dumps(item) for item in items))
        return True

    async def delete_item(self, conversation_id: str, item_id: str) -> bool:
        _, listed = conversation_keys(self._store, conversation_id)
        with translated(self._store.url):
            rows = cast(list[str], await self._store.aio.lrange(listed, 0, -1))
            for row in rows:
                if json.loads(row).get("id") == item_id:
                    return bool(await self._store.aio.lrem(listed, 1, row))
        return False


def conversations_for(store: Store, shared: RedisStore | None) -> Conversations:
    """The SQLite store, or with a shared store (``store.url``) its Redis twin."""
    return SqliteConversations(store) if shared is None else RedisConversations(shared)

"""Stored conversations (SQLite): the Conversations API's objects and their items, in order.

A conversation is ``{"id": "conv_…", "object": "conversation", "created_at", "metadata"}``;
its items are Responses-format items (messages, function calls and their outputs, reasoning),
oldest first, each with its own id. ``/v1/responses`` with ``conversation`` reads them as the
model's history and appends the turn's input and output items.

With a shared store (``store.url``), ``iris.redis.conversations`` keeps the same in Redis;
``conversation_store`` picks one as ``Runtime.create`` picks every store.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Protocol

from iris.redis.connection import RedisStore
from iris.store import Store, transaction

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


class StoredConversations(Protocol):
    """``ConversationsStore`` (SQLite) or ``RedisConversationsStore``."""

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


class ConversationsStore:
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


def conversation_store(store: Store, shared: RedisStore | None) -> StoredConversations:
    """The SQLite store, or with a shared store (``store.url``) its Redis twin."""
    if shared is None:
        return ConversationsStore(store)
    from iris.redis.conversations import RedisConversationsStore

    return RedisConversationsStore(shared)

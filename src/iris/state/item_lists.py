"""Item lists: what the Conversations API stores (OpenAI's "conversations"), items in order.

Iris's own ``Conversation`` is a chat's lifecycle (``iris.agent.conversation``); what OpenAI's
Conversations API calls a conversation is an item list with metadata, kept here.

A conversation is ``{"id": "conv_…", "object": "conversation", "created_at", "metadata"}``;
its items are Responses-format items (messages, function calls and their outputs, reasoning),
oldest first, each with its own id. ``/v1/responses`` with ``conversation`` reads them as the
model's history and appends the turn's input and output items.

``ItemLists`` is what both stores offer: ``SqliteItemLists`` in the SQLite file,
``RedisItemLists`` in the shared store (``store.url``); ``item_lists_for`` picks one.

**In Redis** (``RedisItemLists``), per conversation, two keys (named by ``conversation_keys`` alone, so a rename is one edit; both
carry the conversation id as one hash tag, so a Redis Cluster keeps them in one slot for the
``MULTI`` that writes them together):

- the object, a string (JSON);
- its items, a list of JSON items, oldest first;
- the bytes of its items (an integer kept with every write: the size cap reads it alone).

Reads of a page (``page``) or one item (``item``) never load a conversation whole: SQLite
reads the rows asked for; Redis reads the list in windows of ``_WINDOW`` items.

Like stored responses they never expire: size Redis for them (docs/deploy.md).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from iris.state.redis_store import RedisStore, translated
from iris.state.sqlite import Store, transaction

Json = dict[str, Any]
Order = Literal["asc", "desc"]

_WINDOW = 100  # items read from Redis at once when looking for one


@dataclass
class Page:
    """Up to ``limit`` items in the order asked, and whether more follow; ``after_found``
    is False when the item named by ``after`` is not in the conversation."""

    items: list[Json]
    has_more: bool
    after_found: bool = True


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


class ItemLists(Protocol):
    """``SqliteItemLists`` (SQLite) or ``RedisItemLists``."""

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

    async def size(self, conversation_id: str) -> int | None:
        """The bytes of its items (as stored); None when there is no such conversation."""
        ...

    async def page(
        self, conversation_id: str, *, after: str | None, limit: int, order: Order
    ) -> Page | None:
        """Up to ``limit`` items after the item ``after`` (from the start: None) in ``order``
        (``asc``: oldest first); None when there is no such conversation."""
        ...

    async def item(self, conversation_id: str, item_id: str) -> Json | None:
        """One item, or None (no such item or conversation)."""
        ...


class SqliteItemLists:
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

    async def size(self, conversation_id: str) -> int | None:
        def read(conn: sqlite3.Connection) -> int | None:
            if not _exists(conn, conversation_id):
                return None
            row = conn.execute(
                "SELECT COALESCE(SUM(length(CAST(item AS BLOB))), 0)"
                " FROM api_conversation_items WHERE conversation_id=?",
                (conversation_id,),
            ).fetchone()
            return int(row[0])

        return await self._store.run(read, write=False)

    async def page(
        self, conversation_id: str, *, after: str | None, limit: int, order: Order
    ) -> Page | None:
        def read(conn: sqlite3.Connection) -> Page | None:
            if not _exists(conn, conversation_id):
                return None
            since: int | None = None
            if after is not None:
                row = conn.execute(
                    "SELECT seq FROM api_conversation_items WHERE conversation_id=? AND id=?",
                    (conversation_id, after),
                ).fetchone()
                if row is None:
                    return Page([], False, after_found=False)
                since = int(row[0])
            compare, direction = (">", "ASC") if order == "asc" else ("<", "DESC")
            where = "conversation_id=?" + ("" if since is None else f" AND seq {compare} ?")
            params: tuple[Any, ...] = (
                (conversation_id,) if since is None else (conversation_id, since)
            )
            rows = conn.execute(
                f"SELECT item FROM api_conversation_items WHERE {where}"
                f" ORDER BY seq {direction} LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
            items = [json.loads(row[0]) for row in rows[:limit]]
            return Page(items, len(rows) > limit)

        return await self._store.run(read, write=False)

    async def item(self, conversation_id: str, item_id: str) -> Json | None:
        row = await self._store.run(
            lambda conn: conn.execute(
                "SELECT item FROM api_conversation_items WHERE conversation_id=? AND id=?",
                (conversation_id, item_id),
            ).fetchone(),
            write=False,
        )
        return None if row is None else json.loads(row[0])


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


def _size_key(store: RedisStore, conversation_id: str) -> str:
    """The key of a conversation's items' bytes (in the slot of its other two)."""
    return store.key("conversation", "{" + conversation_id + "}", "bytes")


def _encoded(items: list[Json]) -> list[str]:
    return [json.dumps(item) for item in items]


class RedisItemLists:
    def __init__(self, store: RedisStore) -> None:
        self._store = store

    async def create(self, conversation: Json, items: list[Json]) -> None:
        head, listed = conversation_keys(self._store, conversation["id"])
        rows = _encoded(items)
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.set(head, json.dumps(conversation))
                pipe.set(_size_key(self._store, conversation["id"]), _bytes(rows))
                if rows:
                    pipe.rpush(listed, *rows)
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
                pipe.delete(_size_key(self._store, conversation_id))
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
            rows = _encoded(items)
            if rows:
                async with self._store.aio.pipeline(transaction=True) as pipe:
                    pipe.rpush(listed, *rows)
                    pipe.incrby(_size_key(self._store, conversation_id), _bytes(rows))
                    await pipe.execute()
        return True

    async def delete_item(self, conversation_id: str, item_id: str) -> bool:
        _, listed = conversation_keys(self._store, conversation_id)
        with translated(self._store.url):
            found = await self._find(listed, item_id)
            if found is None:
                return False
            _, row = found
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.lrem(listed, 1, row)
                pipe.decrby(_size_key(self._store, conversation_id), _bytes([row]))
                removed = cast(list[int], await pipe.execute())
        return bool(removed[0])

    async def size(self, conversation_id: str) -> int | None:
        head, _ = conversation_keys(self._store, conversation_id)
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.exists(head)
                pipe.get(_size_key(self._store, conversation_id))
                exists, size = cast(tuple[int, str | None], tuple(await pipe.execute()))
        return None if not exists else int(size or 0)

    async def page(
        self, conversation_id: str, *, after: str | None, limit: int, order: Order
    ) -> Page | None:
        head, listed = conversation_keys(self._store, conversation_id)
        aio = self._store.aio
        with translated(self._store.url):
            async with aio.pipeline(transaction=True) as pipe:
                pipe.exists(head)
                pipe.llen(listed)
                exists, length = cast(tuple[int, int], tuple(await pipe.execute()))
            if not exists:
                return None
            # Positions counted in the order asked: 0 is the oldest (asc) or the newest (desc).
            start = 0
            if after is not None:
                found = await self._find(listed, after, newest_first=order == "desc")
                if found is None:
                    return Page([], False, after_found=False)
                start = found[0] + 1
            count = min(limit + 1, max(length - start, 0))
            if count == 0:
                return Page([], False)
            if order == "asc":
                rows = cast(list[str], await aio.lrange(listed, start, start + count - 1))
            else:
                first, last = length - start - count, length - start - 1
                rows = cast(list[str], await aio.lrange(listed, first, last))[::-1]
        items = [json.loads(row) for row in rows[:limit]]
        return Page(items, len(rows) > limit)

    async def item(self, conversation_id: str, item_id: str) -> Json | None:
        _, listed = conversation_keys(self._store, conversation_id)
        with translated(self._store.url):
            found = await self._find(listed, item_id)
        return None if found is None else json.loads(found[1])

    async def _find(
        self, listed: str, item_id: str, *, newest_first: bool = False
    ) -> tuple[int, str] | None:
        """(its position counted from the oldest, or the newest with ``newest_first``; its row)
        of the item ``item_id``, reading ``_WINDOW`` items at a time."""
        aio = self._store.aio
        position = 0
        while True:
            if newest_first:
                window = cast(
                    list[str], await aio.lrange(listed, -position - _WINDOW, -position - 1)
                )[::-1]
            else:
                window = cast(list[str], await aio.lrange(listed, position, position + _WINDOW - 1))
            for offset, row in enumerate(window):
                if json.loads(row).get("id") == item_id:
                    return position + offset, row
            if len(window) < _WINDOW:
                return None
            position += _WINDOW


def _bytes(rows: list[str]) -> int:
    return sum(len(row.encode()) for row in rows)


def item_lists_for(store: Store, shared: RedisStore | None) -> ItemLists:
    """The SQLite store, or with a shared store (``store.url``) its Redis twin."""
    return SqliteItemLists(store) if shared is None else RedisItemLists(shared)

"""Stored responses: the response object and the conversation it continues.

``GET /v1/responses/{id}`` returns the object; ``previous_response_id`` continues the stored
chat-format conversation (the request's input plus the turn's output; instructions are not
carried over, as on OpenAI). Every output item is also kept under its own id, for the
``item_reference`` input items that name it, and the request's input items, for
``GET /v1/responses/{id}/input_items``. ``DELETE /v1/responses/{id}`` removes all three.

``Responses`` is what both stores offer: ``SqliteResponses`` in the SQLite file,
``RedisResponses`` in the shared store (``store.url``); ``responses_for`` picks one.

**In Redis** (``RedisResponses``): a response stored by one process is read, and continued
with ``previous_response_id``, through any other:

- ``response:stored:{id}`` a hash: ``response`` (the object) and ``conversation`` (what
  ``previous_response_id`` continues);
- ``response:item:{item_id}`` each output item, for the ``item_reference`` input items;
  the hash's ``inputs`` field holds the request's input items and ``items`` the output item ids
  (what ``DELETE /v1/responses/{id}`` removes with it).

Each key is alone in its cluster slot: the items are written first (one key each), then the
response, so a response that can be read has its items.

Like the SQLite rows they never expire (OpenAI keeps them 30 days; Iris has no sweep for
either store): size Redis for them, see docs/deploy.md.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any, Protocol, cast

from redis.typing import EncodableT, FieldT

from iris.state.redis_store import RedisStore, translated
from iris.state.sqlite import Store, transaction

Json = dict[str, Any]

_DDL = """
CREATE TABLE IF NOT EXISTS api_responses (
    id TEXT PRIMARY KEY,
    response TEXT NOT NULL,
    conversation TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS api_response_items (
    id TEXT PRIMARY KEY,
    response_id TEXT NOT NULL,
    item TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS api_response_inputs (
    response_id TEXT PRIMARY KEY,
    items TEXT NOT NULL
);
"""


class Responses(Protocol):
    """Stored responses: ``SqliteResponses`` (SQLite) or ``RedisResponses``."""

    async def save(
        self, response: Json, conversation: list[Json], inputs: list[Json] | None = None
    ) -> None: ...

    async def response(self, response_id: str) -> Json | None: ...

    async def input_items(self, response_id: str) -> list[Json] | None: ...

    async def delete(self, response_id: str) -> bool: ...

    async def history(self, response_id: str) -> list[Json] | None: ...

    async def items(self, item_ids: list[str]) -> dict[str, Json]: ...


def _kept_items(response: Json) -> list[Json]:
    """The output items kept under their own ids too, for ``item_reference``: those with one."""
    return [item for item in response.get("output") or [] if isinstance(item.get("id"), str)]


class SqliteResponses:
    """Every method runs on the store's thread; a locked or lost database raises
    ``StoreUnavailable`` (503)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        store.ensure_schema(_DDL)

    async def save(
        self, response: Json, conversation: list[Json], inputs: list[Json] | None = None
    ) -> None:
        row = (response["id"], json.dumps(response), json.dumps(conversation), time.time())
        items = [(item["id"], response["id"], json.dumps(item)) for item in _kept_items(response)]

        def write(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.execute(
                    "INSERT OR REPLACE INTO api_responses (id, response, conversation, created) "
                    "VALUES (?, ?, ?, ?)",
                    row,
                )
                conn.executemany(
                    "INSERT OR REPLACE INTO api_response_items (id, response_id, item) "
                    "VALUES (?, ?, ?)",
                    items,
                )
                if inputs is not None:
                    conn.execute(
                        "INSERT OR REPLACE INTO api_response_inputs (response_id, items) "
                        "VALUES (?, ?)",
                        (response["id"], json.dumps(inputs)),
                    )

        await self._store.run(write)

    async def input_items(self, response_id: str) -> list[Json] | None:
        """The request's input items (None: no such response; [] when none were kept)."""
        row = await self._store.run(
            lambda conn: conn.execute(
                "SELECT r.id, i.items FROM api_responses r LEFT JOIN api_response_inputs i "
                "ON i.response_id = r.id WHERE r.id=?",
                (response_id,),
            ).fetchone(),
            write=False,
        )
        if row is None:
            return None
        return [] if row[1] is None else json.loads(row[1])

    async def delete(self, response_id: str) -> bool:
        def remove(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                gone = conn.execute("DELETE FROM api_responses WHERE id=?", (response_id,))
                conn.execute("DELETE FROM api_response_items WHERE response_id=?", (response_id,))
                conn.execute("DELETE FROM api_response_inputs WHERE response_id=?", (response_id,))
                return gone.rowcount > 0

        return await self._store.run(remove)

    async def response(self, response_id: str) -> Json | None:
        return await self._column("response", response_id)

    async def history(self, response_id: str) -> list[Json] | None:
        return await self._column("conversation", response_id)

    async def _column(self, column: str, response_id: str) -> Any:
        row = await self._store.run(
            lambda conn: conn.execute(
                f"SELECT {column} FROM api_responses WHERE id=?", (response_id,)
            ).fetchone(),
            write=False,
        )
        return None if row is None else json.loads(row[0])

    async def items(self, item_ids: list[str]) -> dict[str, Json]:
        """Stored output items (messages, function calls, reasoning) by their ids."""
        unique = list(dict.fromkeys(item_ids))

        def read(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            rows: list[sqlite3.Row] = []
            for start in range(0, len(unique), 500):  # SQLite's bound-parameter limit
                batch = unique[start : start + 500]
                marks = ",".join("?" * len(batch))
                rows += conn.execute(
                    f"SELECT id, item FROM api_response_items WHERE id IN ({marks})", batch
                ).fetchall()
            return rows

        rows = await self._store.run(read, write=False) if unique else []
        return {row["id"]: json.loads(row["item"]) for row in rows}


class RedisResponses:
    def __init__(self, store: RedisStore) -> None:
        self._store = store

    async def save(
        self, response: Json, conversation: list[Json], inputs: list[Json] | None = None
    ) -> None:
        kept = _kept_items(response)
        items = {self._store.key("response", "item", item["id"]): json.dumps(item) for item in kept}
        fields: dict[FieldT, EncodableT] = {
            "response": json.dumps(response),
            "conversation": json.dumps(conversation),
            "items": json.dumps([item["id"] for item in kept]),
        }
        if inputs is not None:
            fields["inputs"] = json.dumps(inputs)
        with translated(self._store.url):
            if items:
                async with self._store.aio.pipeline(transaction=False) as pipe:
                    for key, value in items.items():
                        pipe.set(key, value)
                    await pipe.execute()
            await self._store.aio.hset(
                self._store.key("response", "stored", response["id"]), mapping=fields
            )

    async def response(self, response_id: str) -> Json | None:
        return await self._field("response", response_id)

    async def history(self, response_id: str) -> list[Json] | None:
        return await self._field("conversation", response_id)

    async def input_items(self, response_id: str) -> list[Json] | None:
        with translated(self._store.url):
            found = cast(
                list[str | None],
                await self._store.aio.hmget(
                    self._store.key("response", "stored", response_id), ["response", "inputs"]
                ),
            )
        if found[0] is None:
            return None
        return [] if found[1] is None else json.loads(found[1])

    async def delete(self, response_id: str) -> bool:
        key = self._store.key("response", "stored", response_id)
        with translated(self._store.url):
            raw = cast(str | None, await self._store.aio.hget(key, "items"))
            items = cast(list[str], json.loads(raw)) if raw else []
            async with self._store.aio.pipeline(transaction=False) as pipe:
                pipe.delete(key)
                for item_id in items:
                    pipe.delete(self._store.key("response", "item", item_id))
                removed = cast(list[int], await pipe.execute())
        return bool(removed and removed[0])

    async def _field(self, field: str, response_id: str) -> Any:
        with translated(self._store.url):
            raw = await self._store.aio.hget(
                self._store.key("response", "stored", response_id), field
            )
        return None if raw is None else json.loads(cast(str, raw))

    async def items(self, item_ids: list[str]) -> dict[str, Json]:
        """Stored output items (messages, function calls, reasoning) by their ids."""
        unique = list(dict.fromkeys(item_ids))
        if not unique:
            return {}
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=False) as pipe:
                for each in unique:  # one key at a time: each in its own slot
                    pipe.get(self._store.key("response", "item", each))
                rows = cast(list[str | None], await pipe.execute())
        return {i: json.loads(row) for i, row in zip(unique, rows, strict=True) if row is not None}


def responses_for(store: Store, shared: RedisStore | None) -> Responses:
    """The SQLite store, or with a shared store (``store.url``) its Redis twin."""
    return SqliteResponses(store) if shared is None else RedisResponses(shared)

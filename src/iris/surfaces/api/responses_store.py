"""Stored responses (SQLite): the response object and the conversation it continues.

``GET /v1/responses/{id}`` returns the object; ``previous_response_id`` continues the stored
chat-format conversation (the request's input plus the turn's output; instructions are not
carried over, as on OpenAI). Every output item is also kept under its own id, for the
``item_reference`` input items that name it, and the request's input items, for
``GET /v1/responses/{id}/input_items``. ``DELETE /v1/responses/{id}`` removes all three.

With a shared store, ``iris.redis.responses`` keeps the same in Redis; ``StoredResponses`` is
what both offer.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any, Protocol

from iris.store import Store, transaction

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


class StoredResponses(Protocol):
    """Stored responses: ``ResponsesStore`` (SQLite) or ``RedisResponsesStore``."""

    async def save(
        self,
        response: dict[str, Any],
        conversation: list[dict[str, Any]],
        inputs: list[dict[str, Any]] | None = None,
    ) -> None: ...

    async def response(self, response_id: str) -> dict[str, Any] | None: ...

    async def input_items(self, response_id: str) -> list[dict[str, Any]] | None: ...

    async def delete(self, response_id: str) -> bool: ...

    async def conversation(self, response_id: str) -> list[dict[str, Any]] | None: ...

    async def items(self, item_ids: list[str]) -> dict[str, dict[str, Any]]: ...


class ResponsesStore:
    """Every method runs on the store's thread; a locked or lost database raises
    ``StoreUnavailable`` (503)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        store.ensure_schema(_DDL)

    async def save(
        self,
        response: dict[str, Any],
        conversation: list[dict[str, Any]],
        inputs: list[dict[str, Any]] | None = None,
    ) -> None:
        row = (response["id"], json.dumps(response), json.dumps(conversation), time.time())
        # Every output item is kept under its own id too, for ``item_reference``.
        items = [
            (item["id"], response["id"], json.dumps(item))
            for item in response.get("output") or []
            if isinstance(item.get("id"), str)
        ]

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

    async def input_items(self, response_id: str) -> list[dict[str, Any]] | None:
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

    async def response(self, response_id: str) -> dict[str, Any] | None:
        return await self._column("response", response_id)

    async def conversation(self, response_id: str) -> list[dict[str, Any]] | None:
        return await self._column("conversation", response_id)

    async def _column(self, column: str, response_id: str) -> Any:
        row = await self._store.run(
            lambda conn: conn.execute(
                f"SELECT {column} FROM api_responses WHERE id=?", (response_id,)
            ).fetchone(),
            write=False,
        )
        return None if row is None else json.loads(row[0])

    async def items(self, item_ids: list[str]) -> dict[str, dict[str, Any]]:
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

"""Stored responses (SQLite): the response object and the conversation it continues.

``GET /v1/responses/{id}`` returns the object; ``previous_response_id`` continues the stored
chat-format conversation (the request's input plus the turn's output; instructions are not
carried over, as on OpenAI).
"""

from __future__ import annotations

import json
import time
from typing import Any

from iris.store import Store

_DDL = """
CREATE TABLE IF NOT EXISTS api_responses (
    id TEXT PRIMARY KEY,
    response TEXT NOT NULL,
    conversation TEXT NOT NULL,
    created REAL NOT NULL
);
"""


class ResponsesStore:
    """Every method runs on the store's thread; a locked or lost database raises
    ``StoreUnavailable`` (503)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        store.ensure_schema(_DDL)

    async def save(self, response: dict[str, Any], conversation: list[dict[str, Any]]) -> None:
        row = (response["id"], json.dumps(response), json.dumps(conversation), time.time())
        await self._store.run(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO api_responses (id, response, conversation, created) "
                "VALUES (?, ?, ?, ?)",
                row,
            )
        )

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

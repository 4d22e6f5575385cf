"""Stored responses (SQLite): the response object and the conversation it continues.

``GET /v1/responses/{id}`` returns the object; ``previous_response_id`` continues the stored
chat-format conversation (the request's input plus the turn's output; instructions are not
carried over, as on OpenAI). Every output item is also kept under its own id, for the
``item_reference`` input items that name it.
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
CREATE TABLE IF NOT EXISTS api_response_items (
    id TEXT PRIMARY KEY,
    response_id TEXT NOT NULL,
    item TEXT NOT NULL
);
"""


class ResponsesStore:
    def __init__(self, store: Store) -> None:
        self._store = store
        store.ensure_schema(_DDL)

    def save(self, response: dict[str, Any], conversation: list[dict[str, Any]]) -> None:
        self._store.execute(
            "INSERT OR REPLACE INTO api_responses (id, response, conversation, created) "
            "VALUES (?, ?, ?, ?)",
            (response["id"], json.dumps(response), json.dumps(conversation), time.time()),
        )
        items = [
            (item["id"], response["id"], json.dumps(item))
            for item in response.get("output") or []
            if isinstance(item.get("id"), str)
        ]
        self._store.executemany(
            "INSERT OR REPLACE INTO api_response_items (id, response_id, item) VALUES (?, ?, ?)",
            items,
        )

    def response(self, response_id: str) -> dict[str, Any] | None:
        rows = self._store.query("SELECT response FROM api_responses WHERE id=?", (response_id,))
        return json.loads(rows[0]["response"]) if rows else None

    def conversation(self, response_id: str) -> list[dict[str, Any]] | None:
        rows = self._store.query(
            "SELECT conversation FROM api_responses WHERE id=?", (response_id,)
        )
        return json.loads(rows[0]["conversation"]) if rows else None

    def item(self, item_id: str) -> dict[str, Any] | None:
        """A stored output item (message, function call, reasoning) by its id."""
        rows = self._store.query("SELECT item FROM api_response_items WHERE id=?", (item_id,))
        return json.loads(rows[0]["item"]) if rows else None

"""Conversation history per session key (a chat, a device chat, a CLI session), in SQLite."""

from __future__ import annotations

import json
import time
from typing import Any

from iris.store import Store

_DDL = """
CREATE TABLE IF NOT EXISTS session_messages (
    session TEXT NOT NULL,
    pos INTEGER NOT NULL,
    message TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (session, pos)
);
"""


class SessionStore:
    def __init__(self, store: Store) -> None:
        self._store = store
        store.ensure_schema(_DDL)

    def history(self, session: str, limit: int = 200) -> list[dict[str, Any]]:
        rows = self._store.query(
            "SELECT message FROM session_messages WHERE session=? ORDER BY pos DESC LIMIT ?",
            (session, limit),
        )
        messages = [json.loads(row["message"]) for row in reversed(rows)]
        # Never start a history in the middle of a tool exchange.
        while messages and messages[0].get("role") == "tool":
            messages.pop(0)
        return messages

    def append(self, session: str, messages: list[dict[str, Any]]) -> None:
        if not messages:
            return
        rows = self._store.query(
            "SELECT COALESCE(MAX(pos), 0) AS top FROM session_messages WHERE session=?", (session,)
        )
        top = int(rows[0]["top"])
        now = time.time()
        self._store.executemany(
            "INSERT INTO session_messages (session, pos, message, created) VALUES (?, ?, ?, ?)",
            [(session, top + i + 1, json.dumps(m), now) for i, m in enumerate(messages)],
        )

    def reset(self, session: str) -> None:
        self._store.execute("DELETE FROM session_messages WHERE session=?", (session,))

"""Conversation history per session key (a chat, a device chat, a CLI session), in SQLite.

Every method runs on the store's thread (``await``): a locked or lost database raises
``StoreUnavailable`` and never blocks the event loop.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from iris.store import Store, transaction

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

    async def history(self, session: str, limit: int = 200) -> list[dict[str, Any]]:
        def read(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            return conn.execute(
                "SELECT message FROM session_messages WHERE session=? ORDER BY pos DESC LIMIT ?",
                (session, limit),
            ).fetchall()

        rows = await self._store.run(read, write=False)
        messages = [json.loads(row["message"]) for row in reversed(rows)]
        # Never start a history in the middle of a tool exchange.
        while messages and messages[0].get("role") == "tool":
            messages.pop(0)
        return messages

    async def last(self, session: str) -> dict[str, Any] | None:
        """The newest message of ``session`` (None when it has none)."""
        row = await self._store.run(
            lambda conn: conn.execute(
                "SELECT message FROM session_messages WHERE session=? ORDER BY pos DESC LIMIT 1",
                (session,),
            ).fetchone(),
            write=False,
        )
        return None if row is None else json.loads(row["message"])

    async def append(self, session: str, messages: list[dict[str, Any]]) -> None:
        if not messages:
            return
        encoded = [json.dumps(m) for m in messages]
        now = time.time()

        def write(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                top = conn.execute(
                    "SELECT COALESCE(MAX(pos), 0) AS top FROM session_messages WHERE session=?",
                    (session,),
                ).fetchone()["top"]
                conn.executemany(
                    "INSERT INTO session_messages (session, pos, message, created)"
                    " VALUES (?, ?, ?, ?)",
                    [(session, int(top) + i + 1, m, now) for i, m in enumerate(encoded)],
                )

        await self._store.run(write)

    async def reset(self, session: str) -> None:
        await self._store.run(
            lambda conn: conn.execute("DELETE FROM session_messages WHERE session=?", (session,))
        )

"""The embedded SQLite store: one file, one connection per process, schemas owned by their users.

Each part that persists something (sessions, stored responses, the iris frame log) calls
``ensure_schema`` with its own DDL; the store only owns the connection and its settings.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from iris.private import private_dir, private_file


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            # Transcripts: owner-only; SQLite gives the WAL and SHM the database file's mode.
            private_dir(Path(self.path).expanduser().parent)
            private_file(Path(self.path).expanduser())
        # One connection shared by the event loop thread; the lock covers the rare call from a
        # worker thread. WAL keeps readers from blocking the writer.
        self._conn = sqlite3.connect(
            str(Path(self.path).expanduser()) if self.path != ":memory:" else ":memory:",
            check_same_thread=False,
            isolation_level=None,
        )
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.Lock()
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")

    def ensure_schema(self, ddl: str) -> None:
        with self._lock:
            self._conn.executescript(ddl)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._lock:
            self._conn.executemany(sql, rows)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

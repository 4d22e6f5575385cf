"""A SQLite file held locked by another connection, for the store-failure tests."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from tests.socket.conftest import IrisServer


@contextlib.contextmanager
def locked(server: IrisServer, path: Path) -> Iterator[None]:
    """Another process's write lock on the server's database (readers still get through)."""
    server.surface.runtime.store.execute("PRAGMA busy_timeout=100")  # fail in 0.1 s, not 5 s
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()

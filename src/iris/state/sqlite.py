"""The embedded SQLite store: one file, one connection owned by one worker thread.

Each part that persists something (sessions, stored responses, the iris frame log) brings its
own DDL (``ensure_schema``) and its own statements as functions of the connection; the store
only owns the connection, the thread it lives on and what a failure means:

- ``await store.run(fn)`` runs ``fn(conn)`` on the worker thread: the event loop never waits
  on SQLite (a lock held by another process, a slow disk). ``submit(fn)`` queues a write
  without waiting for it; ``call(fn)`` waits from a thread that may block (startup, the CLI).
  One thread means one order: a read queued after a write sees it.
- A lock held longer than ``busy_timeout`` seconds, a read-only file, a full disk: every
  ``sqlite3.Error`` becomes ``StoreUnavailable`` (503 on the API, an ``error`` frame on the
  iris socket), never a traceback.
- At start the store proves it can write (a real write transaction), so a read-only file or
  directory stops ``iris serve`` with one line instead of failing on the first reply.
- Before each write it checks that its file is still the one it opened (deleted or replaced
  while running: writing on would go to a ghost inode nobody will ever read); that is logged
  once and every later call fails with ``StoreUnavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from iris.errors import StoreUnavailable
from iris.private import private_dir, private_file

log = logging.getLogger(__name__)

T = TypeVar("T")
Job = Callable[[sqlite3.Connection], T]

DEFAULT_BUSY_TIMEOUT = 5.0
PAGE_SIZE = 2048  # a new file's (see ``Store._open``)


class Store:
    def __init__(self, path: str | Path, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self._memory = self.path == ":memory:"
        self._file = Path(self.path).expanduser()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="iris-store")
        self._conn: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None
        self._lost: StoreUnavailable | None = None
        self._closed = False
        self._reported = threading.Event()  # a failure of a submitted write was logged
        self._closing: list[Job[Any]] = []  # run as it closes (``before_close``)
        try:
            self._worker.submit(self._open).result()
        except BaseException:
            self._worker.shutdown(wait=False)
            raise

    # -- running statements --------------------------------------------------------------------
    async def run(self, fn: Job[T], *, write: bool = True) -> T:
        """``fn(conn)`` on the store's thread; raises ``StoreUnavailable`` on any SQLite error."""
        return await asyncio.wrap_future(self._worker.submit(self._guarded, fn, write))

    def call(self, fn: Job[T], *, write: bool = True, wait: float | None = None) -> T:
        """``fn(conn)`` on the store's thread, waited for here (at most ``wait`` seconds)."""
        future = self._worker.submit(self._guarded, fn, write)
        try:
            return future.result(timeout=wait)
        except TimeoutError:
            raise StoreUnavailable(
                f"the store is busy: no answer within {wait:g} s (another process holds its lock?)"
            ) from None

    def submit(self, fn: Job[Any]) -> Future[Any]:
        """Queue a write and return at once; a failure is logged (once until one succeeds)."""
        future = self._worker.submit(self._guarded, fn, True)
        future.add_done_callback(self._report)
        return future

    @property
    def available(self) -> bool:
        """False once the file was lost (or the store closed)."""
        return self._lost is None and not self._closed

    def _report(self, future: Future[Any]) -> None:
        error = future.exception()
        if error is None:
            self._reported.clear()
        elif not self._reported.is_set():
            self._reported.set()
            log.error("a store write failed: %s", error)

    def _guarded(self, fn: Job[T], write: bool) -> T:
        if self._lost is not None:
            raise self._lost
        conn = self._conn
        if conn is None:
            raise StoreUnavailable("the store is closed")
        if write:
            self._check_file()
        try:
            return fn(conn)
        except sqlite3.Error as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.rollback()
            raise self._unavailable(exc) from None

    def _unavailable(self, exc: sqlite3.Error) -> StoreUnavailable:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return StoreUnavailable(
                f"the store is busy: its lock was held longer than {self.busy_timeout:g} s "
                f"({self._file})"
            )
        return StoreUnavailable(f"the store failed: {text} ({self._file})")

    # -- the file ------------------------------------------------------------------------------
    def _open(self) -> None:
        try:
            if not self._memory:
                # Transcripts: owner-only; SQLite gives the WAL and SHM the database's mode.
                private_dir(self._file.parent)
                private_file(self._file)
            conn = sqlite3.connect(
                ":memory:" if self._memory else str(self._file),
                isolation_level=None,
                timeout=self.busy_timeout,
                check_same_thread=False,  # only ever used on this thread; closed from it too
            )
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
            # A new file's pages are 2 KB, not 4: every transaction writes each page it
            # touches whole (to the WAL, and again at the checkpoint), and the frame log's
            # small ones touch 3 to 8 (bench/log_writes.py: 41 -> 30 bytes per character
            # of a 2 000-character reply). A file that exists keeps its page size.
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
            if not self._memory:
                conn.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
            conn.execute("PRAGMA synchronous=NORMAL")
            if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
                # Incremental: pages a closed reply freed go back to the file system when the
                # frame log asks (``PRAGMA incremental_vacuum``); an older file is rebuilt once.
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
                conn.execute("VACUUM")
            # Prove a write goes through now rather than on the first reply.
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("CREATE TABLE IF NOT EXISTS iris_store (key TEXT PRIMARY KEY, v TEXT)")
            conn.execute("INSERT OR REPLACE INTO iris_store (key, v) VALUES ('writable', 'yes')")
            conn.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"cannot write the store {self._file}: {exc}") from None
        self._conn = conn
        self._identity = self._stat()

    def _stat(self) -> tuple[int, int] | None:
        if self._memory:
            return None
        info = os.stat(self._file)
        return info.st_dev, info.st_ino

    def _check_file(self) -> None:
        if self._memory:
            return
        try:
            same = self._stat() == self._identity
        except OSError:
            same = False
        if not same:
            self._lost = StoreUnavailable(
                f"the store file {self._file} was deleted or replaced while Iris ran; "
                "nothing more is saved until iris serve restarts"
            )
            log.error("%s", self._lost.message)
            raise self._lost

    # -- compatibility: statements as plain calls (waits; not for the event loop) ---------------
    def ensure_schema(self, ddl: str) -> None:
        self.call(lambda conn: conn.executescript(ddl))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.call(lambda conn: conn.execute(sql, params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.call(lambda conn: conn.executemany(sql, rows))

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return self.call(lambda conn: conn.execute(sql, params).fetchall(), write=False)

    def before_close(self, fn: Job[Any]) -> None:
        """Run ``fn(conn)`` on the store's thread when it closes, before the connection does:
        a writer's last held writes (the frame log's live text)."""
        self._closing.append(fn)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True

        def close(_: object) -> None:
            conn, self._conn = self._conn, None
            if conn is None:
                return
            for last in self._closing:
                try:
                    last(conn)
                except sqlite3.Error as exc:
                    log.error("a write held for the store's close failed: %s", exc)
            conn.close()

        self._worker.submit(close, None).result()
        self._worker.shutdown(wait=True)


def transaction(conn: sqlite3.Connection) -> _Transaction:
    """``with transaction(conn):`` one write transaction (the connection is in autocommit)."""
    return _Transaction(conn)


class _Transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self._conn.execute("BEGIN IMMEDIATE")
        return self._conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self._conn.execute("COMMIT")
        else:
            self._conn.execute("ROLLBACK")

"""The SQLite store: off the event loop, bounded waits on a lock, clear failures."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from iris.errors import StoreUnavailable
from iris.fanout.framelog import SqliteFrameLog
from iris.protocol.types import RULES
from iris.state.sessions import SqliteSessions
from iris.state.sqlite import Store
from tests.fakes.store_faults import exclusive_lock

pytestmark = pytest.mark.timeout(30)


def insert(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
    conn.execute("INSERT INTO t VALUES (1)")


async def test_a_locked_write_waits_off_the_loop_then_fails_clearly(tmp_path: Path) -> None:
    path = tmp_path / "iris.db"
    store = Store(path, busy_timeout=1)
    try:
        with exclusive_lock(path):
            write = asyncio.create_task(store.run(insert))
            ticks = 0
            while not write.done():  # the loop keeps running while the write waits
                ticks += 1
                await asyncio.sleep(0.01)
            with pytest.raises(StoreUnavailable) as caught:
                await write
        assert ticks > 10
        assert caught.value.code == "store_unavailable"
        assert "lock" in caught.value.message
        await store.run(insert)  # the lock is gone: writes go through again
    finally:
        store.close()


async def test_sessions_fail_with_store_unavailable_while_locked(tmp_path: Path) -> None:
    path = tmp_path / "iris.db"
    store = Store(path, busy_timeout=0.5)
    sessions = SqliteSessions(store)
    try:
        with exclusive_lock(path):
            with pytest.raises(StoreUnavailable):
                await sessions.append("s", [{"role": "user", "content": "hi"}])
            assert await sessions.history("s") == []  # readers are not blocked (WAL)
    finally:
        store.close()


async def test_frame_log_appends_never_wait_and_survive_a_lock(tmp_path: Path) -> None:
    path = tmp_path / "iris.db"
    store = Store(path, busy_timeout=0.3)
    log = SqliteFrameLog(store, rules=RULES)
    try:
        with exclusive_lock(path):
            for seq in range(1, 4):  # returns at once: the batch waits on the store's thread
                log.append({"type": "typing", "on": True, "chat_id": "c", "seq": seq})
            # A no-op queued behind the batch: when it runs, the batch has failed (and is kept).
            await store.run(lambda _: None, write=False)
        log.append({"type": "typing", "on": False, "chat_id": "c", "seq": 4})
        frames = await log.read(lambda conn: conn.execute("SELECT seq FROM iris_frames").fetchall())
        assert [row["seq"] for row in frames] == [1, 2, 3, 4]
    finally:
        store.close()


def test_a_read_only_file_is_refused_at_start(
    tmp_path: Path, read_only: Callable[[Path], None]
) -> None:
    path = tmp_path / "iris.db"
    Store(path).close()
    read_only(path)
    with pytest.raises(StoreUnavailable) as caught:
        Store(path)
    assert str(path) in caught.value.message
    assert "readonly" in caught.value.message or "read-only" in caught.value.message


async def test_a_deleted_file_is_reported_once_and_not_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "iris.db"
    store = Store(path)
    try:
        path.unlink()
        with caplog.at_level(logging.ERROR, logger="iris.state.sqlite"):
            for _ in range(2):
                with pytest.raises(StoreUnavailable) as caught:
                    await store.run(insert)
                assert "deleted" in caught.value.message
        assert len([r for r in caplog.records if "deleted" in r.getMessage()]) == 1
        assert not path.exists()  # nothing recreated it either
    finally:
        store.close()

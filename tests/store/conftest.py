"""Ways to take a SQLite file away from Iris, as another process or an admin would."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

LockFile = Callable[[Path], AbstractContextManager[None]]


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Another connection (in its own thread, as another process would) holds
    ``BEGIN EXCLUSIVE`` on ``path`` until the block ends."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        taken.set()
        release.wait(30)
        conn.execute("ROLLBACK")
        conn.close()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert taken.wait(5), "the lock was never taken"
    try:
        yield
    finally:
        release.set()
        holder.join(5)


@pytest.fixture
def read_only() -> Iterator[Callable[[Path], None]]:
    """``read_only(path)``: a file Iris cannot write. root ignores modes, so as root the file
    is made immutable (``chattr +i``, undone at the end)."""
    immutable: list[Path] = []

    def make(path: Path) -> None:
        if os.geteuid() == 0:
            chattr = shutil.which("chattr")
            assert chattr, "running as root needs chattr to make a file read-only"
            subprocess.run([chattr, "+i", str(path)], check=True)
            immutable.append(path)
        else:
            path.chmod(0o444)

    yield make
    for path in immutable:
        subprocess.run(["chattr", "-i", str(path)], check=False)

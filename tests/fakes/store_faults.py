"""Ways to take the SQLite file away from Iris, as another process or an admin would."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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


class ReadOnlyFiles:
    """``make(path)``: a file Iris cannot write. root ignores file modes, so as root the file
    is made immutable (``chattr +i``); ``undo()`` lets the test's tmp dir be removed."""

    def __init__(self) -> None:
        self._immutable: list[Path] = []

    def make(self, path: Path) -> None:
        if os.geteuid() == 0:
            chattr = shutil.which("chattr")
            assert chattr, "running as root needs chattr to make a file read-only"
            subprocess.run([chattr, "+i", str(path)], check=True)
            self._immutable.append(path)
        else:
            path.chmod(0o444)

    def undo(self) -> None:
        for path in self._immutable:
            subprocess.run(["chattr", "-i", str(path)], check=False)

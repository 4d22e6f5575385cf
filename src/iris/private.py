"""Iris's private files: owner-only from the first byte, looser ones tightened at start.

They hold keys (config, app settings) and transcripts (the database, its WAL and SHM, the CLI
history). New files are created with ``os.open(..., 0o600)`` and directories with mode 0700, so
none is ever readable by another local user, not even briefly. ``secure_existing`` tightens the
ones an older Iris (or a careless copy) left readable, and says so in one warning.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

FILE_MODE = 0o600
DIR_MODE = 0o700


def iris_home() -> Path:
    """``~/.iris``: the default home of the config, the database and the app settings."""
    return Path.home() / ".iris"


def private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents); the directory itself is made 0700."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=DIR_MODE, exist_ok=True)


def private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists (then it is not even opened: a
    read-only file is its owner's to report, e.g. SQLite's 'readonly database')."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, flags, FILE_MODE))


def write_private(path: Path, text: str) -> None:
    """Write a new file that is 0600 from its first byte; an existing file is not replaced."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)


def write_private_bytes(path: Path, data: bytes) -> None:
    """``write_private`` for bytes."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)


def private_key(path: Path, size: int = 32) -> bytes:
    """A random key kept in ``path``: made once, 0600 from its first byte; every later caller
    (another process on the same store included) reads the one that is there."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return path.read_bytes()
    key = secrets.token_bytes(size)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(key)
    return key


def database_files(database: Path) -> list[Path]:
    """The SQLite database and the files SQLite keeps beside it in WAL mode."""
    return [database, Path(f"{database}-wal"), Path(f"{database}-shm")]


def tighten(paths: Iterable[Path]) -> list[Path]:
    """Remove group/other access from each existing path (directories 0700, files 0600);
    returns the paths that were looser. A path we cannot change (not ours) is left alone."""
    tightened: list[Path] = []
    for path in paths:
        try:
            mode = os.stat(path).st_mode
            if stat.S_IMODE(mode) & 0o077:
                os.chmod(path, DIR_MODE if stat.S_ISDIR(mode) else FILE_MODE)
                tightened.append(path)
        except OSError:
            continue
    return tightened


def secure_existing(
    *, config: Path | None = None, database: Path | None = None, home: Path | None = None
) -> list[Path]:
    """Tighten Iris's files at start: ``~/.iris`` and what it holds, the config file and the
    database files wherever they are. Logs one warning naming what was tightened."""
    home = home or iris_home()
    paths = [home, home / "config.yaml", home / "app.json", home / "chat_history"]
    paths += database_files(home / "iris.db")
    if config is not None:
        paths.append(config)
    if database is not None:
        paths += database_files(database)
    unique = list(dict.fromkeys(Path(os.path.abspath(p)) for p in paths))
    tightened = tighten(unique)
    if tightened:
        log.warning(
            "made private (others could read them): %s", ", ".join(str(p) for p in tightened)
        )
    return tightened

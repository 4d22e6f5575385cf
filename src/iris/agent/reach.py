"""What the built-in tools may reach: the files ``read_file`` opens and the environment
``terminal`` commands run with.

``read_file``: the path (relative to the terminal cwd) is resolved with ``realpath`` — symlinks
and ``..`` included — and must then lie inside one of ``tools.read_file.roots`` (default: the
terminal cwd). Iris's own files (config, database, ``~/.iris``) and the kernel's pseudo-files
(``/proc``, ``/sys``, ``/dev``) are refused even inside a root. Only regular files are read: the
file is checked before it is opened and again on the open descriptor (``O_NONBLOCK``, so a FIFO
never blocks a worker thread; ``O_NOFOLLOW``, so a symlink swapped in after the check is not
followed).

``terminal``: commands see only the variables named in ``tools.terminal.env``; a name that looks
like a secret (``*_API_KEY``, ``*_TOKEN``, ``IRIS_*``...) is never passed, even if listed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from iris.config import looks_secret

# Pseudo-files: /proc/self/environ holds the server's keys; device files may block or never end.
_KERNEL = (Path("/proc"), Path("/sys"), Path("/dev"))


class Refused(Exception):
    """A path read_file must not read; the message says why, for the model."""


class FileReach:
    """Decides and performs a confined read."""

    def __init__(self, base: Path, roots: Iterable[Path], private: Iterable[Path] = ()) -> None:
        self.base = base
        self.roots = [_real(root) for root in roots]
        self.denied = [*(_real(path) for path in private), *_KERNEL]

    def read_head(self, name: str, size: int) -> bytes:
        """Up to ``size`` bytes of the file ``name``; raises ``Refused`` or ``OSError``.

        Blocking: run it in a worker thread."""
        try:
            target = _real(self.base / name)
        except ValueError:  # an embedded NUL byte
            raise Refused("it is not a valid path") from None
        if not any(target.is_relative_to(root) for root in self.roots):
            raise Refused("it is outside the folders read_file may read")
        if any(target.is_relative_to(denied) for denied in self.denied):
            raise Refused("it is private to Iris or the system")
        if not stat.S_ISREG(os.stat(target).st_mode):
            raise Refused("it is not a regular file")
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
        descriptor = os.open(target, flags | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(descriptor, "rb") as handle:
            # The path may have been swapped for something else between the check and the open.
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise Refused("it is not a regular file")
            return handle.read(size)


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path.expanduser()))


def command_env(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a terminal command runs with: the allow-listed variables Iris has."""
    source = os.environ if environ is None else environ
    return {name: source[name] for name in names if name in source and not looks_secret(name)}

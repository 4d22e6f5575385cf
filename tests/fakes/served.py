"""``iris serve`` as a user runs it: a subprocess on a free loopback port, its stderr readable.

Shared by the serve tests and the adversarial suite (``tests/adversarial/``), which attack the
real server process over real sockets.
"""

from __future__ import annotations

import queue
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import yaml


class Served:
    """A running ``iris serve`` whose stderr lines are readable as they come (``entry``: how
    the interpreter starts ``iris.cli``; ``("-c", code)`` runs code of the test's around it)."""

    def __init__(
        self,
        config: Path,
        env: dict[str, str] | None = None,
        open_files: int | None = None,
        args: tuple[str, ...] = (),
        entry: tuple[str, ...] = ("-m", "iris.cli"),
    ) -> None:
        def limit_files() -> None:
            if open_files is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

        self.process = subprocess.Popen(
            [sys.executable, *entry, "serve", "--config", str(config), *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=limit_files if open_files is not None else None,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.log: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float = 60) -> None:
        # A hang guard between two lines, not a speed check: a busy machine (CI's workers, a
        # Synapse starting beside it) can take tens of seconds to import and start a process.
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"never logged {text!r}; got {self.log}") from None
            self.log.append(line)
            if text in line:
                return

    def drain(self) -> list[str]:
        """Every stderr line logged so far (including those not yet waited for)."""
        while True:
            try:
                self.log.append(self.lines.get_nowait())
            except queue.Empty:
                return self.log

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        # The pipe ends with the process (and its children that inherited it): close it here,
        # not whenever the garbage collector gets to it (a ResourceWarning in a later test).
        self._reader.join(5)
        if self.process.stderr is not None and not self._reader.is_alive():
            self.process.stderr.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_config(
    tmp_path: Path, upstream_url: str, port: int, *, name: str = "config.yaml", **sections: Any
) -> Path:
    """A config for ``iris serve`` on ``port`` against a (fake) upstream; ``sections`` are
    merged over the baseline one level deep (tools run unasked: ``tools.approval.mode: off``,
    as in ``make_config``)."""
    data: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": port},
        "model": {"base_url": upstream_url, "name": "fake-model", "api_key": "sk"},
        "platforms": {"iris": {"enabled": False}},
        "store": {"path": str(tmp_path / "iris.db")},
        "tools": {"approval": {"mode": "off"}},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    config = tmp_path / name
    config.write_text(yaml.safe_dump(data))
    return config


def serve(
    tmp_path: Path,
    upstream_url: str,
    *,
    open_files: int | None = None,
    name: str = "config.yaml",
    args: tuple[str, ...] = (),
    entry: tuple[str, ...] = ("-m", "iris.cli"),
    **sections: Any,
) -> tuple[Served, str]:
    """Start ``iris serve`` and wait until it answers; returns it and its base URL.
    ``open_files`` sets the process's file limit (soft and hard), as a small host's would;
    ``name`` is the config file's (several servers in one test each need their own); ``args``
    go to ``iris serve`` (``("--workers", "2")``); ``entry`` as ``Served``'s."""
    port = free_port()
    config = write_config(tmp_path, upstream_url, port, name=name, **sections)
    server = Served(config, open_files=open_files, args=args, entry=entry)
    try:
        server.wait_for("Application startup complete")
    except BaseException:
        server.stop()
        raise
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/health", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.05)
    return server, url

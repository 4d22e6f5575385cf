"""A real ``redis-server`` per test: Debian's package, on a free loopback port, in the test's
temp dir, never the system service. ``.ci/run`` installs it; without it these tests skip and
say so (as the browser tests do without chromium)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
import redis

from tests.fakes.served import Served, serve
from tests.fakes.upstream import FakeUpstream
from tests.scale.devices import STREAMING
from tests.scale.processes import TOKEN, Process
from tests.scale.topologies import low_ports
from tests.socket.conftest import TOKEN as SOCKET_TOKEN

REDIS_SERVER = shutil.which("redis-server")


class RedisServer:
    """One redis-server process; ``stop``/``start`` keep its port and its data (AOF, fsync
    always: what it acknowledged survives a restart), ``kill`` is kill -9."""

    def __init__(self, directory: Path) -> None:
        assert REDIS_SERVER is not None
        self.directory = directory
        self.port = low_ports(1, bus=False)[0]  # kept across a restart: see ``low_ports``
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert REDIS_SERVER is not None
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--daemonize",
                "no",
                "--logfile",
                str(self.directory / "redis.log"),
            ],  # fmt: skip
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    if client.ping():
                        return
                except redis.RedisError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        raise AssertionError(
                            f"redis-server did not start: {(self.directory / 'redis.log').read_text()}"
                        ) from None
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        """A clean shutdown (SIGTERM)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=2)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (apt install redis-server; .ci/run does)")
    directory = tmp_path / "redis"
    directory.mkdir()
    server = RedisServer(directory)
    server.start()
    yield server
    server.kill()


class Shared(Protocol):
    """A Redis set-up ``iris serve`` can share: one server, a cluster, Sentinels."""

    @property
    def url(self) -> str: ...


@contextlib.contextmanager
def serve_on_redis(
    tmp_path: Path,
    upstream_url: str,
    redis: Shared,
    names: tuple[str, ...] = ("a", "b"),
    *,
    store: dict[str, Any] | None = None,
    **sections: Any,
) -> Iterator[list[tuple[Served, str]]]:
    """``with serve_on_redis(...) as running:`` ``iris serve`` processes sharing ``redis``
    (each with its own config ``<name>.yaml`` and SQLite file) and their base URLs, stopped
    when the block ends. ``store`` adds store keys."""
    running: list[tuple[Served, str]] = []
    try:
        for name in names:
            shared = {"url": redis.url, "path": str(tmp_path / f"{name}.db"), **(store or {})}
            running.append(
                serve(tmp_path, upstream_url, name=f"{name}.yaml", store=shared, **sections)
            )
        yield running
    finally:
        for server, _ in running:
            server.stop()


LEASE = 2  # seconds: a dead owner's turn is closed within this (and a reaper round)


def socket_url(url: str) -> str:
    """The iris socket of a server's base URL."""
    return url.replace("http://", "ws://") + "/iris/ws"


@pytest.fixture
def processes(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> Iterator[tuple[Process, Process]]:
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        redis_server,
        platforms={"iris": {"enabled": True, "tokens": [TOKEN]}},
    ) as running:
        started = [
            Process(served, url, tmp_path / f"{name}.yaml")
            for name, (served, url) in zip(("a", "b"), running, strict=True)
        ]
        for process in started:
            process.config.chmod(0o600)
        yield started[0], started[1]


@pytest.fixture
def two(
    tmp_path: Path, redis_server: RedisServer, upstream: FakeUpstream
) -> Iterator[list[tuple[Served, str]]]:
    """Two ``iris serve`` processes sharing ``redis_server`` with a short turn lease (``LEASE``):
    each with its iris socket URL."""
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        redis_server,
        store={"lease": LEASE},
        platforms={"iris": {"enabled": True, "tokens": [SOCKET_TOKEN]}},
        streaming=STREAMING,
        display={"platforms": {"iris": {"buffer_threshold": 1}}},
    ) as running:
        yield [(server, socket_url(url)) for server, url in running]

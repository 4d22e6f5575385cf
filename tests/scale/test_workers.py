"""``iris serve --workers N``: N processes on one port, a dead one restarted, SIGTERM stops all;
with the SQLite store it refuses in one line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.served import free_port, serve
from tests.fakes.upstream import FakeUpstream, text
from tests.scale.conftest import RedisServer
from tests.scale.workers import ask, sockets, until, workers_of

pytestmark = pytest.mark.timeout(90)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def refusal(config: Path) -> str:
    """The one line ``iris serve --workers 2`` refuses to start with (exit code not 0)."""
    done = subprocess.run(
        [sys.executable, "-m", "iris.cli", "serve", "--config", str(config), "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_workers_refuse_the_sqlite_store_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"server: {{port: {free_port()}}}\nstore: {{path: {tmp_path / 'iris.db'}}}\n"
        "platforms: {iris: {enabled: false}}\n"
    )
    config.chmod(0o600)
    line = refusal(config)
    assert "--workers 2 needs a shared store" in line and "store.url" in line


def test_two_workers_serve_one_port_a_killed_one_comes_back_and_sigterm_stops_all(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    store = {"url": redis_server.url, "path": str(tmp_path / "iris.db")}
    server, url = serve(tmp_path, upstream.base_url, store=store, args=("--workers", "2"))
    try:
        server.wait_for("Application startup complete")  # the second worker's
        workers = workers_of(server.process.pid)
        assert len(workers) == 2, server.drain()

        upstream.script(text("one"))
        assert ask(url, "hi") == "one"

        os.kill(workers[0], signal.SIGKILL)
        server.wait_for("worker 1 exited (killed by SIGKILL); restarting it")
        server.wait_for("Application startup complete")  # its replacement
        now = workers_of(server.process.pid)
        assert len(now) == 2 and workers[0] not in now and workers[1] in now
        for reply in ("two", "three"):
            upstream.script(text(reply))
            assert ask(url, "again") == reply

        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(30) == 0
        assert not any(alive(pid) for pid in now)
        log = server.drain()
        assert not any("Traceback" in line for line in log), log
    finally:
        for pid in workers_of(server.process.pid) if server.process.poll() is None else []:
            os.kill(pid, signal.SIGKILL)
        server.stop()


def test_workers_stop_when_their_parent_is_killed(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    store = {"url": redis_server.url, "path": str(tmp_path / "iris.db")}
    server, _ = serve(tmp_path, upstream.base_url, store=store, args=("--workers", "2"))
    workers: list[int] = []
    try:
        server.wait_for("Application startup complete")
        workers = workers_of(server.process.pid)
        assert len(workers) == 2
        server.process.kill()  # kill -9: the parent cannot stop its workers itself
        server.process.wait(10)
        deadline = time.monotonic() + 20
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in workers), "a worker outlived its parent"
    finally:
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        server.stop()


def test_a_burst_of_connections_is_spread_over_the_workers(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    """Each worker has its own socket on the port (SO_REUSEPORT): a burst of connections is not
    all taken by whichever worker woke first. 24 connections all on one of two workers by
    chance: 2 in 2**24."""
    store = {"url": redis_server.url, "path": str(tmp_path / "iris.db")}
    server, url = serve(tmp_path, upstream.base_url, store=store, args=("--workers", "2"))
    port = int(url.rsplit(":", 1)[1])
    clients: list[socket.socket] = []
    try:
        workers = workers_of(server.process.pid)
        # A worker listens a moment after its "startup complete": wait for both sockets.
        until(lambda: all(sockets(pid, port, "0A") for pid in workers))
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(24)]
        until(lambda: sum(sockets(pid, port, "01") for pid in workers) >= 24)
        counts = [sockets(pid, port, "01") for pid in workers]
        # (>= : a client of another test that reuses a freed port may be counted too)
        assert sum(counts) >= 24 and min(counts) > 0, counts
    finally:
        for client in clients:
            client.close()
        server.stop()


def test_a_second_server_on_the_workers_port_refuses_in_one_line(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    """The workers' shared port is not open to any other server: a second ``--workers`` on it
    is refused, as a second ``iris serve`` would be."""
    store = {"url": redis_server.url, "path": str(tmp_path / "iris.db")}
    server, url = serve(tmp_path, upstream.base_url, store=store, args=("--workers", "2"))
    try:
        config = tmp_path / "config.yaml"  # the same port, the same store
        assert f"cannot listen on {url[7:]}" in refusal(config)
    finally:
        server.stop()


def test_a_worker_that_cannot_reach_redis_is_retried_until_it_can(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    store = {"url": redis_server.url, "path": str(tmp_path / "iris.db")}
    server, url = serve(tmp_path, upstream.base_url, store=store, args=("--workers", "2"))
    try:
        server.wait_for("Application startup complete")
        first, _ = workers_of(server.process.pid)
        redis_server.stop()
        os.kill(first, signal.SIGKILL)
        server.wait_for("iris: worker: cannot reach the store")  # one line, not a traceback
        server.wait_for("worker 1 exited (exit code 2); restarting it in")  # backing off
        redis_server.start()
        server.wait_for("Application startup complete")
        upstream.script(text("all back"))
        assert ask(url, "hi") == "all back"
        assert len(workers_of(server.process.pid)) == 2
        log = server.drain()
        assert not any("Traceback" in line for line in log), log
    finally:
        server.stop()

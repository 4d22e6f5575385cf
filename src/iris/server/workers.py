"""``iris serve --workers N``: N server processes on one port, started and watched by a parent.

The parent makes the checks one process makes (bind safety, the shared store answers, the port
is free) and starts N workers; each binds its own listening socket on the port with
``SO_REUSEPORT`` and serves the whole app on it, with the options of a single ``iris serve``
(``server.uvicorn_options``: the connection guard, timeouts, WebSocket options). The kernel
spreads new connections over the workers' sockets by a hash of their addresses: one shared
socket would hand a burst of connections to whichever worker woke first (asyncio accepts all
it can per wake-up), and streams and sockets stay where they landed. Workers share everything
through the shared store (``store.url``), so a client may land on any of them: a process keeping
chats in its own SQLite file could not work this way, and ``--workers`` refuses to start
without Redis.

The parent restarts a worker that dies (kill -9, a crash), waiting longer each time one dies
soon after it started, so a worker that cannot start does not spin; SIGTERM or Ctrl-C stops
every worker gracefully (each lets its turns finish, as one ``iris serve`` does) and exits 0.
A worker whose parent died stops too.

With ``server.metrics.enabled`` the parent points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh folder
before the first worker starts (its own temporary one, or the operator's, emptied), so a scrape
of any worker reports every worker's series (``iris.observability.metrics``); a dead worker's
gauges are dropped from the sums, its counters stay.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from types import FrameType

from iris.config import Config
from iris.errors import ConfigError, IrisError
from iris.observability import metrics
from iris.server.asgi import (
    build_app,
    check_bind_safety,
    exit_cleanly,
    settle_heap,
    uvicorn_options,
)
from iris.state.redis_store import RedisStore

log = logging.getLogger("iris.server")

# A worker that dies sooner than this after its start is failing to start, not crashing once.
_EARLY = 10.0
_BACKOFF_MAX = 30.0
# uvicorn's graceful shutdown (5 s) plus start-up and the lifespan's stop.
_STOP_GRACE = 15.0
_PR_SET_PDEATHSIG = 1  # <sys/prctl.h>


def serve_workers(config: Config, workers: int) -> None:
    """Run ``workers`` server processes on ``server.host:port`` until SIGTERM / Ctrl-C."""
    if not config.store.shared:
        raise ConfigError(
            f"--workers {workers} needs a shared store: set store.url to a redis:// URL "
            "(with the SQLite store each process would keep its own chats and history)"
        )
    check_bind_safety(config)
    shared = RedisStore.configured(config.store)
    try:
        shared.check()  # unreachable: one line here, not one per worker
    finally:
        shared.close()
    Supervisor(config, workers).run()


@dataclass
class _Worker:
    index: int
    process: BaseProcess | None = None
    started: float = 0.0
    backoff: float = 0.0
    restart_at: float = 0.0


class Supervisor:
    """The parent of ``--workers``: binds the socket, keeps ``count`` workers running."""

    def __init__(self, config: Config, count: int) -> None:
        self.config = config
        self.workers = [_Worker(index) for index in range(1, count + 1)]
        self._stop = threading.Event()
        # spawn, not fork: a worker starts from a clean interpreter (no parent threads or
        # locks), as it would on any platform.
        self._context = multiprocessing.get_context("spawn")

    def run(self) -> None:
        # The port must be free (not another server's): a plain bind says so, in one line.
        probe = _listener(self.config.server.host, self.config.server.port, share=False)
        port = probe.getsockname()[1]  # server.port 0: the one the kernel chose, for all
        probe.close()
        handlers = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        metrics_dir = _metrics_dir() if self.config.server.metrics.enabled else None
        try:
            for worker in self.workers:
                self._start(worker, port)
            while not self._stop.wait(0.2):
                self._watch(port)
        finally:
            self._stop_all()
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            if metrics_dir is not None:
                metrics_dir.cleanup()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stop.set()

    def _start(self, worker: _Worker, port: int) -> None:
        process = self._context.Process(
            target=_serve_worker, args=(self.config, port), name=f"iris-worker-{worker.index}"
        )
        process.start()
        worker.process, worker.started = process, time.monotonic()

    def _watch(self, port: int) -> None:
        now = time.monotonic()
        for worker in self.workers:
            process = worker.process
            if process is not None and not process.is_alive():
                code = process.exitcode
                if process.pid is not None:
                    metrics.process_dead(process.pid)
                process.close()
                worker.process = None
                early = now - worker.started < _EARLY
                worker.backoff = min(max(worker.backoff * 2, 1.0), _BACKOFF_MAX) if early else 0.0
                worker.restart_at = now + worker.backoff
                log.warning(
                    "worker %d exited (%s); restarting it%s",
                    worker.index,
                    _exit_status(code),
                    f" in {worker.backoff:.0f}s" if worker.backoff else "",
                )
            if worker.process is None and now >= worker.restart_at and not self._stop.is_set():
                self._start(worker, port)

    def _stop_all(self) -> None:
        running = [w.process for w in self.workers if w.process is not None]
        for process in running:
            if process.is_alive():
                process.terminate()  # SIGTERM: uvicorn's graceful shutdown
        deadline = time.monotonic() + _STOP_GRACE
        for process in running:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                log.warning("worker %s did not stop in time; killed", process.name)
                process.kill()
                process.join()


class _MetricsDir:
    """The folder the workers' metric values live in, for this run."""

    def __init__(self, path: str, owned: bool) -> None:
        self.path, self.owned = path, owned

    def cleanup(self) -> None:
        if self.owned:
            shutil.rmtree(self.path, ignore_errors=True)


def _metrics_dir() -> _MetricsDir:
    """``PROMETHEUS_MULTIPROC_DIR`` for the workers: the operator's (emptied of a previous run's
    values, which are not this run's), else a new private temporary folder."""
    given = os.environ.get(metrics.MULTIPROC_ENV)
    if given:
        os.makedirs(given, exist_ok=True)
        metrics.clean_multiprocess_dir(given)
        return _MetricsDir(given, owned=False)
    path = tempfile.mkdtemp(prefix="iris-metrics-")
    os.environ[metrics.MULTIPROC_ENV] = path  # inherited by every worker started from now on
    return _MetricsDir(path, owned=True)


def _listener(host: str, port: int, *, share: bool) -> socket.socket:
    """A socket bound to ``host:port`` (IPv6 when the host is); ``share``: ``SO_REUSEPORT``, so
    every worker binds its own and the kernel spreads connections over them."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if share:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _serve_worker(config: Config, port: int) -> None:
    """One worker: the app on its own socket on ``port``, until SIGTERM (graceful, exit 0)."""
    import uvicorn

    # uvicorn re-raises the signal that stopped it after a graceful shutdown: exit 0 then, not
    # a KeyboardInterrupt traceback (Ctrl-C reaches every process of the terminal's group).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, exit_cleanly)
    _stop_with_parent()
    try:
        app = build_app(config)
        sock = _listener(config.server.host, port, share=True)
    except IrisError as exc:  # its store is unreachable now: one line; the parent retries
        print(f"iris: worker: {exc.message}", file=sys.stderr)
        raise SystemExit(2) from None
    settle_heap()
    uvicorn.Server(uvicorn.Config(app, **uvicorn_options(config))).run(sockets=[sock])


def _stop_with_parent() -> None:
    """SIGTERM this worker when the parent dies (Linux): no unsupervised worker keeps the port."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the parent's SIGTERM still stops workers
        return


def _exit_status(code: int | None) -> str:
    if code is not None and code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"

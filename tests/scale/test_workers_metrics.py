"""``iris serve --workers 2`` on a real redis-server: one scrape of the shared port covers every
worker (prometheus-client's multiprocess mode), and a worker killed and restarted keeps its
counts in the sums while its running gauges leave them."""

from __future__ import annotations

import glob
import os
import signal
from pathlib import Path

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict

from tests.fakes.served import Served, free_port, write_config
from tests.fakes.upstream import FakeUpstream, text
from tests.observability.helpers import METRICS, scrape
from tests.scale.conftest import RedisServer
from tests.scale.workers import ask, sockets, until, workers_of

pytestmark = pytest.mark.timeout(120)

TURNS = 12  # each on a new connection: all on one of two workers by chance: 2 in 2**12


def started_per_process(directory: Path) -> dict[int, float]:
    """``iris_turns_started_total`` as each process's own value file holds it."""
    counts: dict[int, float] = {}
    for path in glob.glob(str(directory / "counter_*.db")):
        pid = int(Path(path).stem.split("_")[1])
        values = MmapedDict(path, read_mode=True)
        try:
            counts[pid] = sum(
                value
                for key, value, _ in values.read_all_values()
                if key.startswith('["iris_turns_started"')
            )
        finally:
            values.close()
    return counts


def test_one_scrape_counts_the_turns_of_both_workers(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    directory = tmp_path / "metrics"  # the operator's folder; a stale file from before is removed
    directory.mkdir()
    (directory / "counter_1.db").write_bytes(b"stale")
    port = free_port()
    config = write_config(
        tmp_path,
        upstream.base_url,
        port,
        server={"host": "127.0.0.1", "port": port, **METRICS},
        store={"url": redis_server.url, "path": str(tmp_path / "iris.db")},
    )
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    server = Served(config, env=env, args=("--workers", "2"))
    url = f"http://127.0.0.1:{port}"
    try:
        server.wait_for("Application startup complete")
        server.wait_for("Application startup complete")
        workers = workers_of(server.process.pid)
        until(lambda: all(sockets(pid, port, "0A") for pid in workers))
        assert not (directory / "counter_1.db").exists()

        for n in range(TURNS):
            upstream.script(text(f"reply {n}"))
            assert ask(url, f"q{n}") == f"reply {n}"  # a new client: a new connection

        per_worker = started_per_process(directory)
        assert set(per_worker) == set(workers), per_worker
        assert all(0 < count < TURNS for count in per_worker.values()), per_worker
        # Whichever worker answers the scrape, it reports both workers' turns.
        for _ in range(4):
            got = scrape(url)
            assert got.value("iris_turns_started_total", surface="api") == TURNS
            assert got.value("iris_turns_ended_total", outcome="complete") == TURNS
            assert got.value("iris_time_to_first_token_seconds_count") == TURNS
            assert got.value("iris_provider_requests_total", status="ok") == TURNS
            assert got.value("iris_turns_running") == 0

        os.kill(workers[0], signal.SIGKILL)
        server.wait_for("worker 1 exited (killed by SIGKILL); restarting it")
        server.wait_for("Application startup complete")
        # The dead worker's counts stay in the sums: a counter never goes backwards.
        assert scrape(url).value("iris_turns_started_total") == TURNS
        assert httpx.get(f"{url}/metrics").status_code == 401

        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(30) == 0
    finally:
        for pid in workers_of(server.process.pid) if server.process.poll() is None else []:
            os.kill(pid, signal.SIGKILL)
        server.stop()

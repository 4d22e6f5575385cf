"""Two ``iris serve`` processes on each store topology past one Redis node: a Redis Cluster (3
primaries, 3 replicas) and a Sentinel-managed primary. Every case runs on both (``topology``);
the bodies are the one-node tests' own (``tests/scale/across.py``). What belongs to one
topology alone (its refusals, key layout, failovers) stays in ``test_cluster.py`` and
``test_sentinel.py``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.served import Served
from tests.fakes.upstream import FakeUpstream
from tests.scale import across
from tests.scale.conftest import Shared, serve_on_redis, socket_url
from tests.scale.devices import STREAMING
from tests.scale.processes import Process
from tests.scale.topologies import REDIS_CLI, REDIS_SERVER, Cluster, SentinelSetup
from tests.socket.conftest import TOKEN

pytestmark = pytest.mark.timeout(120)


@dataclass
class Topology:
    name: str
    shared: Shared
    keys: Callable[[], dict[str, Any]]  # the ``store`` keys that reach it


@pytest.fixture(scope="module", params=["cluster", "sentinel"])
def topology(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Topology]:
    if REDIS_SERVER is None or REDIS_CLI is None:
        pytest.skip("redis-server is not installed (apt install redis-server; .ci/run does)")
    name: str = request.param
    if name == "cluster":
        cluster = Cluster(tmp_path_factory.mktemp("cluster"))
        try:
            cluster.start()
            yield Topology(name, cluster, lambda: {"mode": "cluster"})
        finally:
            cluster.stop()
        return
    sentinel = SentinelSetup(tmp_path_factory.mktemp("sentinel"))
    try:
        sentinel.start()
        yield Topology(name, sentinel, sentinel.store)
    finally:
        sentinel.stop()


@pytest.fixture
def store(topology: Topology) -> dict[str, Any]:
    """``store`` keys for ``iris serve`` on the topology (a fresh prefix: a fresh store)."""
    return {**topology.keys(), "prefix": uuid.uuid4().hex[:12], "lease": 2}


@pytest.fixture
def two(
    tmp_path: Path, topology: Topology, store: dict[str, Any], upstream: FakeUpstream
) -> Iterator[list[tuple[Served, str]]]:
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        topology.shared,
        store=store,
        platforms={"iris": {"enabled": True, "tokens": [TOKEN]}},
        streaming=STREAMING,
        display={"platforms": {"iris": {"buffer_threshold": 1}}},
    ) as running:
        yield [(server, socket_url(url)) for server, url in running]


@pytest.fixture
def processes(
    tmp_path: Path, topology: Topology, store: dict[str, Any], upstream: FakeUpstream
) -> Iterator[tuple[Process, Process]]:
    with across.data_processes(tmp_path, upstream, topology.shared, store) as both:
        yield both


async def test_two_processes_send_the_same_frames_under_the_same_seqs(
    topology: Topology, two: list[tuple[Served, str]], upstream: FakeUpstream
) -> None:
    await across.devices_on_both_processes_see_one_log((two[0][1], two[1][1]), upstream)
    if topology.name == "cluster":  # every key of a chat in one slot
        for server, _ in two:
            assert not any("Traceback" in line or "CROSSSLOT" in line for line in server.drain())


async def test_a_device_resumes_on_the_other_process(
    two: list[tuple[Served, str]], upstream: FakeUpstream
) -> None:
    await across.a_device_resumes_on_the_other_process_without_gap_or_duplicate(
        (two[0][1], two[1][1]), upstream
    )


async def test_a_stop_on_the_other_process_reaches_the_owner(
    two: list[tuple[Served, str]], upstream: FakeUpstream
) -> None:
    await across.one_turn_per_chat_and_a_stop_on_the_other_process_reaches_the_owner(two, upstream)


async def test_a_killed_owners_turn_is_closed_by_the_survivor(
    two: list[tuple[Served, str]], upstream: FakeUpstream
) -> None:
    await across.a_killed_owners_turn_is_closed_by_the_survivor_within_the_lease(two, upstream)


async def test_stored_responses_background_runs_and_devices_across_processes(
    upstream: FakeUpstream, processes: tuple[Process, Process]
) -> None:
    await across.data_across_processes(upstream, processes)


async def test_two_pollers_for_one_bot_one_polls_and_the_standby_takes_over(
    tmp_path: Path, topology: Topology, store: dict[str, Any], upstream: FakeUpstream
) -> None:
    await across.standby_poller_takes_over(tmp_path, upstream, topology.shared, store)

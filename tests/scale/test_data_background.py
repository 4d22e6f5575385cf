"""Background responses across two ``iris serve`` processes on one Redis: a run started on A is
polled, followed from a sequence number and cancelled through B, with the official SDK."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai import OpenAI

from iris.state.background import SharedRuns
from iris.state.redis_store import RedisStore
from tests.api.background_runs import payload, until
from tests.api.openresponses import valid_response
from tests.fakes.upstream import FakeUpstream, gated, hold, text
from tests.scale.across import (
    a_run_on_a_is_cancelled_through_b,
    a_run_on_a_is_polled_and_resumed_through_b_with_no_gap_and_no_duplicate,
    take_until_text,
)
from tests.scale.conftest import RedisServer, serve_on_redis
from tests.scale.processes import Process, until_async

pytestmark = pytest.mark.timeout(90)


async def test_a_runs_events_while_redis_was_away_are_shared_once_it_is_back(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisStore(redis_server.url, timeout=0.5)
    runs = SharedRuns(store, ttl=60)
    snapshot = {"id": "resp_1", "status": "in_progress"}
    publisher = runs.publisher("resp_1", lambda: snapshot)
    writing = asyncio.create_task(publisher.run())
    try:
        publisher.add([{"sequence_number": 0}, {"sequence_number": 1}])
        await until_async(lambda: entries(runs, 2), "the first events")
        redis_server.stop()
        publisher.add([{"sequence_number": 2}])

        async def failed() -> bool:
            return "not shared" in caplog.text

        await until_async(failed, "the publisher's failed write")
        redis_server.start()
        snapshot = {"id": "resp_1", "status": "completed"}
        publisher.add([{"sequence_number": 3}])
        publisher.end()
        async with asyncio.timeout(20):
            await writing
        found, ended = await runs.read("resp_1", "0-0", block=None)
        events = [json.loads(fields["event"]) for _, fields in found if "event" in fields]
        assert [e["sequence_number"] for e in events] == [0, 1, 2, 3] and ended
        assert await runs.state("resp_1") == (snapshot, True)
    finally:
        writing.cancel()
        await store.aclose()


async def entries(runs: SharedRuns, count: int) -> bool:
    found, _ = await runs.read("resp_1", "0-0", block=None)
    return len(found) >= count


def test_a_run_just_created_on_a_is_found_through_b_at_once(
    upstream: FakeUpstream, processes: tuple[Process, Process]
) -> None:
    a, b = processes
    upstream.script(gated("Hi", after=0))
    with a.client() as on_a, b.client() as on_b:
        created = on_a.responses.create(model="fake-model", input="hi", background=True)
        assert on_b.responses.retrieve(created.id).status in ("queued", "in_progress")
        upstream.release()
        done = until(
            lambda: (r := on_b.responses.retrieve(created.id)).status == "completed" and r,
            "completion, seen on B",
        )
        assert done.output_text == "Hi"


@pytest.fixture
def leased(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> Iterator[tuple[Process, Process]]:
    """Two processes whose leases run out 2 s after their holder stops renewing."""
    with serve_on_redis(tmp_path, upstream.base_url, redis_server, store={"lease": 2}) as running:
        a, b = (
            Process(served, url, tmp_path / f"{name}.yaml")
            for name, (served, url) in zip(("a", "b"), running, strict=True)
        )
        yield a, b


def follow_until_text(client: OpenAI, response_id: str) -> tuple[Any, list[dict[str, Any]]]:
    """A follower of the run from its start, caught up to its first text (still open)."""
    stream = client.responses.retrieve(response_id, stream=True)
    seen: list[dict[str, Any]] = []
    for event in stream:
        seen.append(payload(event))
        if event.type == "response.output_text.delta":
            return stream, seen
    raise AssertionError(f"the run ended before its text: {seen}")


def killed_mid_run(a: Process, on_a: OpenAI, on_b: OpenAI) -> tuple[str, list[Any]]:
    """Start a run on A (held after "Hel"), follow it on B, kill -9 A: the id and the
    events B's follower got after the kill, up to the error that ended its stream."""
    response_id = take_until_text(on_a)[0].response.id
    stream, seen = follow_until_text(on_b, response_id)
    a.served.process.kill()
    a.served.process.wait(10)
    after: list[Any] = []
    with pytest.raises(openai.APIError) as ended:  # the SDK raises the stream's error event
        for event in stream:
            after.append(payload(event))
    assert seen[-1]["delta"] == "Hel"
    return response_id, [*after, ended.value]


def test_a_run_whose_process_is_killed_ends_failed_owner_lost_for_followers_and_polls_on_b(
    upstream: FakeUpstream, leased: tuple[Process, Process]
) -> None:
    a, b = leased
    upstream.script(hold("Hel"))
    with a.client() as on_a, b.client() as on_b:
        # The follower's wait is bounded by the client's 10 s read timeout: a hang fails.
        response_id, after = killed_mid_run(a, on_a, on_b)
        error = after[-1]
        assert error.code == "owner_lost"
        polled = on_b.responses.retrieve(response_id)
        valid_response(polled)
        assert polled.status == "failed"
        assert polled.error is not None and polled.error.code == "owner_lost"
        assert polled.output_text == "Hel", "the output so far is kept"
        # The whole stream again through B: the same events, then the same failed end.
        again: list[dict[str, Any]] = []
        with pytest.raises(openai.APIError) as replayed:
            for event in on_b.responses.retrieve(response_id, stream=True):
                again.append(payload(event))
        assert replayed.value.code == "owner_lost"
        numbers = [e["sequence_number"] for e in again]
        assert numbers == list(range(len(numbers))), "no gap, no duplicate"
        assert on_b.responses.cancel(response_id).status == "failed", "an ended run stays so"


def test_a_run_that_ended_before_its_process_died_is_left_as_it_ended(
    upstream: FakeUpstream, leased: tuple[Process, Process], redis_server: RedisServer
) -> None:
    a, b = leased
    upstream.script(text("done"), hold("Hel"))
    with a.client() as on_a, b.client() as on_b:
        finished = on_a.responses.create(model="fake-model", input="hi", background=True).id
        until(
            lambda: on_b.responses.retrieve(finished).status == "completed", "the first run's end"
        )
        before = [payload(e) for e in on_b.responses.retrieve(finished, stream=True)]
        # A second run, killed with A: once B ended it, B's reaper has been over every run.
        _, after = killed_mid_run(a, on_a, on_b)
        assert after[-1].code == "owner_lost"
        done = on_b.responses.retrieve(finished)
        assert done.status == "completed" and done.output_text == "done" and done.error is None
        assert [payload(e) for e in on_b.responses.retrieve(finished, stream=True)] == before
    with redis_server.client() as redis:
        assert redis.hlen("iris:response:running") == 0, "no run is left to any reaper"


async def test_one_survivor_alone_takes_a_run_whose_owner_stopped_renewing(
    redis_server: RedisServer,
) -> None:
    stores = [RedisStore(redis_server.url, timeout=0.5) for _ in range(3)]
    owner, *survivors = (SharedRuns(store, ttl=60, lease=1) for store in stores)
    try:
        # The owner announces the run and then never renews (as if killed).
        await owner.announce("resp_1", {"id": "resp_1", "status": "in_progress"}, [])
        assert await survivors[0].orphans() == [], "a held lease is no orphan"

        async def orphaned() -> bool:
            return await survivors[0].orphans() == ["resp_1"]

        await until_async(orphaned, "the lease to run out")
        taken = await asyncio.gather(*(s.take("resp_1") for s in survivors))
        assert sum(lease is not None for lease in taken) == 1
    finally:
        for store in stores:
            await store.aclose()


def stored_status(redis_server: RedisServer, response_id: str) -> str | None:
    """The status of the response as stored (what outlives the run's shared events)."""
    with redis_server.client() as redis:
        raw = redis.hget(f"iris:response:stored:{response_id}", "response")
    return None if raw is None else json.loads(raw)["status"]


def test_a_process_that_loses_a_runs_lease_while_alive_keeps_nothing_over_the_survivors_end(
    upstream: FakeUpstream, leased: tuple[Process, Process], redis_server: RedisServer
) -> None:
    """A is paused (SIGSTOP) mid-run past its lease: B's reaper ends the run as failed
    (owner_lost) and stores it. A then resumes, finds its lease gone and stops the run: its
    own ``incomplete`` must not overwrite the survivor's end, stored or polled through A."""
    a, b = leased
    upstream.script(hold("Hel"))
    with a.client() as on_a, b.client() as on_b:
        response_id = take_until_text(on_a)[0].response.id
        a.served.process.send_signal(signal.SIGSTOP)
        try:
            until(
                lambda: on_b.responses.retrieve(response_id).status == "failed",
                "the survivor's end",
                within=15,
            )
            assert stored_status(redis_server, response_id) == "failed"
        finally:
            a.served.process.send_signal(signal.SIGCONT)
        until(  # a hang guard: A, just resumed, may wait its turn on a loaded machine
            lambda: on_a.responses.retrieve(response_id).status != "in_progress",
            "A to see its run ended",
            within=40,
        )
        # A stops its turn once it sees the lease gone; give it time to store what it would.
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and stored_status(redis_server, response_id) == "failed":
            time.sleep(0.05)
        assert stored_status(redis_server, response_id) == "failed"
        for client in (on_a, on_b):
            polled = client.responses.retrieve(response_id)
            assert polled.status == "failed"
            assert polled.error is not None and polled.error.code == "owner_lost"


def test_a_run_on_a_is_polled_and_resumed_through_b_with_no_gap_and_no_duplicate(
    upstream: FakeUpstream, processes: tuple[Process, Process]
) -> None:
    a_run_on_a_is_polled_and_resumed_through_b_with_no_gap_and_no_duplicate(upstream, processes)


def test_a_run_on_a_is_cancelled_through_b(
    upstream: FakeUpstream, processes: tuple[Process, Process]
) -> None:
    a_run_on_a_is_cancelled_through_b(upstream, processes)

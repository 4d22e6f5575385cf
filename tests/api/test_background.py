"""Background responses with the openai SDK against Iris on a real socket: a turn that runs on
without its client, polled, followed and resumed from a sequence number, and cancelled."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, cast

import httpx
import pytest
from openai import BadRequestError, NotFoundError, OpenAI, RateLimitError

from iris.surfaces.api.background import BackgroundRun, BackgroundRuns
from tests.api.background_runs import payload, until
from tests.api.conftest import IrisServer, StartIris
from tests.api.openresponses import valid_response
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, gated, hold, text

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def server(iris_server: StartIris) -> IrisServer:
    return iris_server()


def connect(server: IrisServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10)


@pytest.fixture
def client(server: IrisServer) -> Iterator[OpenAI]:
    with connect(server) as c:
        yield c


def test_create_returns_at_once_and_polling_sees_it_through(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(gated("Hel", "lo", after=1))
    created = client.responses.create(model="fake-model", input="hi", background=True)
    valid_response(created)
    assert created.background is True
    assert created.status in ("queued", "in_progress")
    assert upstream.gate_reached.wait(5), "the turn never reached the upstream"

    running = until(
        lambda: (r := client.responses.retrieve(created.id)).status == "in_progress" and r,
        "the turn to start",
    )
    valid_response(running)

    upstream.release()
    done = until(
        lambda: (r := client.responses.retrieve(created.id)).status == "completed" and r,
        "completion",
    )
    valid_response(done)
    assert done.output_text == "Hello"
    assert done.usage is not None and done.usage.total_tokens == 15


def test_a_dropped_stream_resumes_with_exactly_the_remaining_events(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(gated("Hel", "lo", " there", after=1))
    first: list[dict[str, Any]] = []
    stream = client.responses.create(model="fake-model", input="hi", background=True, stream=True)
    for event in stream:
        first.append(payload(event))
        if event.type == "response.output_item.added":
            break
    stream.close()  # the client drops; the turn is still held at the upstream's gate
    response_id = first[0]["response"]["id"]
    so_far = until(  # polled: the output so far
        lambda: (r := client.responses.retrieve(response_id)).output_text == "Hel" and r,
        "the first text",
    )
    valid_response(so_far)
    assert so_far.status == "in_progress"
    assert not upstream.disconnected.is_set(), "a background turn outlives its client"

    last = first[-1]["sequence_number"]
    rest: list[dict[str, Any]] = []
    resumed = client.responses.retrieve(response_id, stream=True, starting_after=last)
    for event in resumed:
        rest.append(payload(event))
        if event.type == "response.output_text.delta":
            upstream.release()  # "Hel" was replayed; what follows is live
    numbers = [e["sequence_number"] for e in first + rest]
    assert numbers == list(range(len(numbers))), "no gap, no duplicate"
    assert rest[-1]["type"] == "response.completed"
    deltas = [e["delta"] for e in first + rest if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == "Hello there"
    assert client.responses.retrieve(response_id).output_text == "Hello there"

    # The whole stream again, from the start, is the same events.
    again = [payload(e) for e in client.responses.retrieve(response_id, stream=True)]
    assert again == first + rest


def test_cancel_stops_the_turn_and_closes_the_upstream(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(hold("Hel"))
    stream = client.responses.create(model="fake-model", input="hi", background=True, stream=True)
    events: list[dict[str, Any]] = []
    for event in stream:
        events.append(payload(event))
        if event.type == "response.output_text.delta":
            break
    response_id = events[0]["response"]["id"]
    cancelled = client.responses.cancel(response_id)
    valid_response(cancelled)
    assert cancelled.status == "cancelled"
    assert cancelled.output_text == "Hel"
    assert upstream.disconnected.wait(5), "the upstream request stayed open"
    # The stream that was following it ends, with the cancelled response.
    events += [payload(event) for event in stream]
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["status"] == "cancelled"
    assert client.responses.retrieve(response_id).status == "cancelled"
    assert client.responses.cancel(response_id).status == "cancelled", "cancel is idempotent"


def test_background_turns_hold_a_concurrency_slot(
    upstream: FakeUpstream, iris_server: StartIris
) -> None:
    server = iris_server(platforms={"api_server": {"max_concurrent": 1}})
    upstream.script(hold("Hel"), text("ok"))
    with connect(server) as client:
        held = client.responses.create(model="fake-model", input="hi", background=True)
        assert upstream.gate_reached.wait(5)
        with pytest.raises(RateLimitError):
            client.responses.create(model="fake-model", input="again")
        client.responses.cancel(held.id)
        assert client.responses.create(model="fake-model", input="again").output_text == "ok"


def test_shutdown_interrupts_a_running_turn_and_stores_it(
    upstream: FakeUpstream, iris_server: StartIris, make_config: MakeConfig
) -> None:
    config = make_config(upstream.base_url, platforms={"iris": {"enabled": False}})
    server = IrisServer(config).start()  # closed by the test; the fixture's reopens the store
    upstream.script(hold("Hel"))
    with connect(server) as client:
        stream = client.responses.create(
            model="fake-model", input="hi", background=True, stream=True
        )
        first: list[dict[str, Any]] = []
        started = threading.Event()

        def follow() -> None:
            for event in stream:
                first.append(payload(event))
                if event.type == "response.output_text.delta":
                    started.set()

        follower = threading.Thread(target=follow)
        follower.start()
        assert started.wait(5), "no text streamed"
        server.close()  # while the stream is still following the held turn
        follower.join(10)
        assert not follower.is_alive(), "the following stream did not end"
    assert upstream.disconnected.wait(5), "the upstream request stayed open"
    assert first[-1]["type"] == "response.incomplete", "the follower got the end of the turn"
    response_id = first[0]["response"]["id"]
    with connect(iris_server()) as client:
        stored = client.responses.retrieve(response_id)
    valid_response(stored)
    assert stored.status == "incomplete"
    assert stored.incomplete_details is not None
    assert stored.incomplete_details.reason == "interrupted"  # type: ignore[comparison-overlap]
    assert stored.output_text == "Hel"


def test_background_needs_store(client: OpenAI) -> None:
    with pytest.raises(BadRequestError) as caught:
        client.responses.create(model="fake-model", input="hi", background=True, store=False)
    assert caught.value.body["param"] == "background"  # type: ignore[index]


def test_foreground_responses_neither_stream_from_get_nor_cancel(
    upstream: FakeUpstream, server: IrisServer, client: OpenAI
) -> None:
    upstream.script(text("Hi."))
    done = client.responses.create(model="fake-model", input="hi")
    with pytest.raises(BadRequestError) as caught:
        list(client.responses.retrieve(done.id, stream=True))
    assert caught.value.code == "stream_not_available"
    with pytest.raises(BadRequestError) as caught:
        client.responses.cancel(done.id)
    assert caught.value.code == "not_cancellable"
    with pytest.raises(NotFoundError):
        client.responses.cancel("resp_missing")
    with httpx.Client(timeout=10) as http:
        bad = http.get(f"{server.base_url}/responses/{done.id}?stream=true&starting_after=x")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "starting_after"


def test_ended_runs_are_kept_by_age_and_by_count() -> None:
    now = [0.0]
    runs = BackgroundRuns(ttl=60.0, keep=2, clock=lambda: now[0])
    made: list[BackgroundRun] = []
    nothing = cast(Any, None)  # the runs never start here
    for number in range(4):
        run = BackgroundRun(f"resp_{number}", nothing, nothing, nothing, release=lambda: None)
        made.append(run)
        runs.add(run)
    for number, run in enumerate(made[:3]):
        run.ended_at = float(number)  # resp_3 is still running
    assert [runs.get(f"resp_{n}") is not None for n in range(4)] == [False, True, True, True]
    now[0] = 61.5  # resp_1 ended 60.5 s ago, resp_2 59.5 s ago
    assert [runs.get(f"resp_{n}") is not None for n in range(4)] == [False, False, True, True]
    now[0] = 10_000.0
    assert runs.get("resp_3") is made[3], "a running turn is never dropped"
    assert runs.running() == [made[3]]


@pytest.mark.parametrize(("streaming", "so_far"), [(True, "Hel"), (False, "")])
def test_a_poll_shows_the_output_so_far_only_when_iris_streams_from_the_provider(
    iris_server: StartIris, upstream: FakeUpstream, streaming: bool, so_far: str
) -> None:
    """docs/api.md: with the master switch on, a poll mid-answer shows the text written so
    far; off, the provider answers in one piece and a poll shows no output until it has."""
    server = iris_server(streaming={"enabled": streaming})
    upstream.script(gated("Hel", "lo", after=1))
    with connect(server) as client:
        created = client.responses.create(model="fake-model", input="hi", background=True)
        assert upstream.gate_reached.wait(5), "the turn never reached the upstream"
        assert upstream.requests[-1].stream is streaming
        if streaming:
            until(lambda: client.responses.retrieve(created.id).output_text, "the first text")
        polled = client.responses.retrieve(created.id)
        assert polled.status == "in_progress" and polled.output_text == so_far
        upstream.release()
        done = until(
            lambda: (r := client.responses.retrieve(created.id)).status == "completed" and r,
            "completion",
        )
        assert done.output_text == "Hello"

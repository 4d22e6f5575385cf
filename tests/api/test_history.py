"""What ``previous_response_id`` continues after each way a turn ends (the one rule of
``iris.agent.history``), seen in the next request to the model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from openai import APIError, OpenAI

from iris.surfaces.api.wires import ResponsesWire
from tests.api.conftest import IrisServer, StartIris
from tests.fakes.upstream import FakeUpstream, hold, stream_error, text

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def server(iris_server: StartIris) -> IrisServer:
    return iris_server()


@pytest.fixture
def client(server: IrisServer) -> Iterator[OpenAI]:
    with OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10) as c:
        yield c


def sent(upstream: FakeUpstream) -> list[tuple[str, Any]]:
    return [(m["role"], m["content"]) for m in upstream.requests[-1].body["messages"]]


def test_a_complete_response_is_continued(upstream: FakeUpstream, client: OpenAI) -> None:
    upstream.script(text("Blue."), text("Yes."))
    first = client.responses.create(model="fake-model", input="sky?")
    client.responses.create(model="fake-model", input="sure?", previous_response_id=first.id)
    assert sent(upstream) == [("user", "sky?"), ("assistant", "Blue."), ("user", "sure?")]


def test_a_response_that_failed_midway_is_continued_as_far_as_it_was_shown(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(stream_error("The sky ", "is bl"), text("blue."))
    first = ""
    with pytest.raises(APIError, match="upstream failed mid-stream"):
        for event in client.responses.create(model="fake-model", input="sky?", stream=True):
            if event.type == "response.created":
                first = event.response.id
    assert client.responses.retrieve(first).status == "failed"
    client.responses.create(model="fake-model", input="go on", previous_response_id=first)
    assert sent(upstream) == [
        ("user", "sky?"),
        ("assistant", "The sky is bl\n\n[interrupted]"),
        ("user", "go on"),
    ]


def test_a_cancelled_response_is_continued_as_shown_and_marked_cut(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(hold("Hel"), text("lo."))
    stream = client.responses.create(model="fake-model", input="hi", background=True, stream=True)
    response_id = ""
    for event in stream:
        if event.type == "response.created":
            response_id = event.response.id
        if event.type == "response.output_text.delta":
            break
    assert client.responses.cancel(response_id).status == "cancelled"
    for _ in stream:
        pass
    client.responses.create(model="fake-model", input="go on", previous_response_id=response_id)
    assert sent(upstream) == [
        ("user", "hi"),
        ("assistant", "Hel\n\n[interrupted]"),
        ("user", "go on"),
    ]


@pytest.mark.parametrize("ending", ["completed", "failed"])
def test_a_streamed_response_is_stored_before_its_last_event_goes_out(
    upstream: FakeUpstream, client: OpenAI, monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    """A client that retrieves (or continues) a response as soon as its stream ended finds it,
    however long the store takes: the terminal event waits for the save, not the other way."""
    save = ResponsesWire.finished

    async def slow_store(wire: ResponsesWire) -> None:
        await asyncio.sleep(0.3)  # a store that takes a moment (a lock, a remote Redis)
        await save(wire)

    monkeypatch.setattr(ResponsesWire, "finished", slow_store)
    upstream.script(text("Blue.") if ending == "completed" else stream_error("The sky ", "is"))
    response_id = ""
    try:
        for event in client.responses.create(model="fake-model", input="sky?", stream=True):
            if event.type == "response.created":
                response_id = event.response.id
            if event.type == f"response.{ending}":
                break
    except APIError:
        assert ending == "failed"  # the SDK raises on the in-band error event
    assert client.responses.retrieve(response_id).status == ending

"""The output cap on the API (issue 10, finding 8): an upstream that streams past
``model.max_output_chars`` gives the client the capped text with ``finish_reason: "length"``
(Responses: ``status: "incomplete"``), and the upstream connection is closed."""

from __future__ import annotations

import pytest
from openai import OpenAI

from tests.api.conftest import IrisServer, StartIris
from tests.fakes.upstream import FakeUpstream, hold, text

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "hi"}]
CAP = 25
CAPPED = "0123456789012345678901234"


@pytest.fixture
def server(iris_server: StartIris) -> IrisServer:
    return iris_server(model={"max_output_chars": CAP})


@pytest.fixture
def endless(upstream: FakeUpstream) -> FakeUpstream:
    # Held open after the chunks: only the cap ends the turn.
    upstream.script(hold(*["0123456789"] * 8))
    return upstream


@pytest.fixture
def long(upstream: FakeUpstream) -> FakeUpstream:
    # A non-streamed client request asks the upstream for a whole answer (no stream to cut).
    upstream.script(text(*["0123456789"] * 8))
    return upstream


def client_for(server: IrisServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10)


def test_streamed_chat_is_cut_with_finish_reason_length(
    endless: FakeUpstream, server: IrisServer
) -> None:
    with client_for(server) as client:
        chunks = list(
            client.chat.completions.create(model="fake-model", messages=USER, stream=True)
        )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == CAPPED
    assert chunks[-1].choices[0].finish_reason == "length"
    assert endless.disconnected.wait(5)


def test_non_streamed_chat_is_cut_with_finish_reason_length(
    long: FakeUpstream, server: IrisServer
) -> None:
    with client_for(server) as client:
        reply = client.chat.completions.create(model="fake-model", messages=USER)
    assert reply.choices[0].message.content == CAPPED
    assert reply.choices[0].finish_reason == "length"


def test_streamed_response_ends_incomplete(endless: FakeUpstream, server: IrisServer) -> None:
    with (
        client_for(server) as client,
        client.responses.stream(model="fake-model", input="hi") as stream,
    ):
        events = list(stream)
    assert events[-1].type == "response.incomplete"
    response = events[-1].response
    assert response.status == "incomplete" and response.output_text == CAPPED
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert endless.disconnected.wait(5)


def test_non_streamed_response_is_incomplete_with_the_reason(
    long: FakeUpstream, server: IrisServer
) -> None:
    with client_for(server) as client:
        response = client.responses.create(model="fake-model", input="hi")
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == CAPPED

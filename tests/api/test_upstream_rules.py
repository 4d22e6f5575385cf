"""OpenAI's rules for what goes upstream, against a fake model that checks each request as
OpenAI does and refuses in OpenAI's words (``openai_rules``): ``metadata`` only with ``store``;
reasoning models take ``max_completion_tokens`` only; ``reasoning_effort`` and ``verbosity``
only where the model has them. Iris learns the last two from the provider's 400 (no list of
model names): it asks again once, adjusted, and sends the model's later requests that way."""

from __future__ import annotations

import pytest
from openai import APIStatusError, BadRequestError, OpenAI

from tests.api.conftest import IrisServer, StartIris
from tests.fakes.upstream import FakeUpstream, Received, Scenario, error, openai_rules, responder

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "hi"}]


def client_for(server: IrisServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10)


def sent(upstream: FakeUpstream) -> list[set[str]]:
    """The limit and knob fields of each upstream request, in order."""
    watched = {"max_tokens", "max_completion_tokens", "reasoning_effort", "verbosity", "store"}
    return [watched & set(request.body) for request in upstream.requests]


def test_metadata_stays_with_iris_and_the_model_answers(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    upstream.default = openai_rules("fine", reasoning_model=False)
    with client_for(server) as client:
        chat = client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            metadata={"team": "a"},
        )
        response = client.responses.create(model="fake-model", input="hi", metadata={"k": "v"})
    assert chat.choices[0].message.content == "fine" and response.output_text == "fine"
    assert response.metadata == {"k": "v"}  # kept with the stored response
    assert all("metadata" not in request.body for request in upstream.requests)
    assert len(upstream.requests) == 2


def test_max_completion_tokens_reaches_a_reasoning_model_as_such(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    """Open WebUI's title task and Home Assistant always send a limit."""
    server = iris_server()
    upstream.default = openai_rules("fine", reasoning_model=True)
    with client_for(server) as client:
        reply = client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            max_completion_tokens=1000,
        )
    assert reply.choices[0].message.content == "fine"
    assert sent(upstream) == [{"max_completion_tokens"}]


@pytest.mark.parametrize("stream", [False, True])
def test_max_tokens_is_converted_after_the_400_that_names_it_and_remembered(
    iris_server: StartIris, upstream: FakeUpstream, stream: bool
) -> None:
    server = iris_server()
    upstream.default = openai_rules("fine", reasoning_model=True)
    with client_for(server) as client:
        for _ in range(2):
            answer = client.chat.completions.create(
                model="fake-model",
                messages=USER,  # pyright: ignore[reportArgumentType]
                max_tokens=3000,
                stream=stream,
            )
            if stream:
                text = "".join(c.choices[0].delta.content or "" for c in answer if c.choices)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportAttributeAccessIssue, reportUnknownArgumentType]
            else:
                text = answer.choices[0].message.content  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
            assert text == "fine"
    # Refused once, asked again with the other field; the next request goes that way at once.
    assert sent(upstream) == [{"max_tokens"}, {"max_completion_tokens"}, {"max_completion_tokens"}]
    assert upstream.requests[1].body["max_completion_tokens"] == 3000


def test_an_older_server_that_refuses_max_completion_tokens_gets_max_tokens(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    upstream.default = openai_rules("fine", reasoning_model=False, knows_completion_tokens=False)
    with client_for(server) as client:
        for _ in range(2):
            reply = client.chat.completions.create(
                model="fake-model",
                messages=USER,  # pyright: ignore[reportArgumentType]
                max_completion_tokens=50,
            )
            assert reply.choices[0].message.content == "fine"
    assert sent(upstream) == [{"max_completion_tokens"}, {"max_tokens"}, {"max_tokens"}]


@pytest.mark.parametrize("knob", ["reasoning_effort", "verbosity"])
def test_a_knob_the_model_lacks_is_left_out_after_its_400_and_remembered(
    iris_server: StartIris, upstream: FakeUpstream, knob: str
) -> None:
    server = iris_server()
    upstream.default = openai_rules("fine", reasoning_model=False)
    with client_for(server) as client:
        for _ in range(2):
            reply = client.chat.completions.create(
                model="fake-model",
                messages=USER,  # pyright: ignore[reportArgumentType]
                extra_body={knob: "low"},
            )
            assert reply.choices[0].message.content == "fine"
    assert sent(upstream) == [{knob}, set(), set()]


def test_a_reasoning_model_keeps_its_knobs_and_the_limit_in_one_request(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    upstream.default = openai_rules("fine", reasoning_model=True)
    with client_for(server) as client:
        client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            max_completion_tokens=10,
            reasoning_effort="high",
            verbosity="low",
        )
    assert sent(upstream) == [{"max_completion_tokens", "reasoning_effort", "verbosity"}]


def test_a_400_that_names_nothing_iris_can_adjust_is_the_clients_without_a_retry(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    upstream.script(error(400, "Invalid value: 'huge'. Supported values are: 'low'.", param="x"))
    with client_for(server) as client, pytest.raises(APIStatusError) as caught:
        client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            max_tokens=5,
        )
    # The provider's refusal, passed on as a bad gateway with its words; asked once only.
    assert caught.value.status_code == 502 and "Invalid value" in caught.value.message
    assert len(upstream.requests) == 1


def test_bad_request_from_iris_itself_never_reaches_the_model(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    with client_for(server) as client, pytest.raises(BadRequestError):
        client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            store=True,
        )
    assert upstream.requests == []


def test_a_server_that_refuses_both_limit_spellings_is_asked_twice_then_the_client_told(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()

    def refuse(request: Received) -> Scenario:
        name = "max_tokens" if "max_tokens" in request.body else "max_completion_tokens"
        message = f"Unsupported parameter: '{name}' is not supported with this model."
        return error(400, message, code="unsupported_parameter", param=name)

    upstream.default = responder(refuse)
    with client_for(server) as client, pytest.raises(APIStatusError) as caught:
        client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            max_tokens=5,
        )
    assert caught.value.status_code == 502 and "max_completion_tokens" in caught.value.message
    assert sent(upstream) == [{"max_tokens"}, {"max_completion_tokens"}]

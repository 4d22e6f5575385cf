"""Bad input, auth and limits: an OpenAI error body and a 4xx, never a 500 or a hang, and
nothing else affected."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from openai import AuthenticationError, OpenAI, RateLimitError

from tests.api.conftest import IrisServer, StartIris
from tests.fakes.upstream import FakeUpstream, hold, text

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
def server(iris_server: StartIris) -> IrisServer:
    return iris_server(platforms={"api_server": {"max_body_bytes": 2048}})


def post(server: IrisServer, path: str, content: bytes | str, **headers: str) -> httpx.Response:
    with httpx.Client(timeout=10) as http:
        return http.post(
            f"{server.base_url}{path}",
            content=content,
            headers={"content-type": "application/json", **headers},
        )


def assert_error(response: httpx.Response, status: int, param: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error["message"], str) and error["message"]
    assert {"type", "code", "param"} <= set(error)
    if param is not None:
        assert error["param"] == param
    return error


CHAT_BAD = [
    ("not json", "{", None),
    ("empty body", "", None),
    ("a JSON array", "[]", None),
    ("missing messages", '{"model": "fake-model"}', "messages"),
    ("messages not a list", '{"messages": "hi"}', "messages"),
    ("empty messages", '{"messages": []}', "messages"),
    ("unknown role", '{"messages": [{"role": "wizard", "content": "x"}]}', "messages[0].role"),
    ("content a number", '{"messages": [{"role": "user", "content": 5}]}', "messages[0].content"),
    ("stream a string", '{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}', "stream"),
    ("max_tokens a bool", '{"messages": [{"role": "user", "content": "x"}], "max_tokens": true}', "max_tokens"),
    ("tools not function", '{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web"}]}', "tools[0]"),
    ("tool message without id", '{"messages": [{"role": "tool", "content": "x"}]}', "messages[0].tool_call_id"),
]  # fmt: skip


@pytest.mark.parametrize(("why", "body", "param"), CHAT_BAD, ids=[c[0] for c in CHAT_BAD])
def test_bad_chat_requests_are_400(
    server: IrisServer, upstream: FakeUpstream, why: str, body: str, param: str | None
) -> None:
    assert_error(post(server, "/chat/completions", body), 400, param)
    assert upstream.requests == [], "a bad request never reaches the model"


RESPONSES_BAD = [
    ("missing input", '{"model": "fake-model"}', "input"),
    ("input a number", '{"input": 3}', "input"),
    ("empty input list", '{"input": []}', "input"),
    ("bad item type", '{"input": [{"type": "file_search_call"}]}', "input[0].type"),
    ("bad part", '{"input": [{"role": "user", "content": [{"type": "input_audio"}]}]}', "input[0].content[0]"),
    ("instructions a list", '{"input": "x", "instructions": ["a"]}', "instructions"),
    ("temperature a string", '{"input": "x", "temperature": "hot"}', "temperature"),
]  # fmt: skip


@pytest.mark.parametrize(("why", "body", "param"), RESPONSES_BAD, ids=[c[0] for c in RESPONSES_BAD])
def test_bad_responses_requests_are_400(
    server: IrisServer, upstream: FakeUpstream, why: str, body: str, param: str | None
) -> None:
    assert_error(post(server, "/responses", body), 400, param)
    assert upstream.requests == []


def test_unknown_model_and_unknown_previous_response_are_404(server: IrisServer) -> None:
    error = assert_error(
        post(
            server,
            "/chat/completions",
            '{"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}',
        ),
        404,
        "model",
    )
    assert error["code"] == "model_not_found"
    assert_error(
        post(server, "/responses", '{"input": "x", "previous_response_id": "resp_nope"}'),
        404,
        "previous_response_id",
    )


def test_body_over_the_limit_is_413(server: IrisServer, upstream: FakeUpstream) -> None:
    big = '{"messages": [{"role": "user", "content": "' + "x" * 4096 + '"}]}'
    assert_error(post(server, "/chat/completions", big), 413)

    # Without a Content-Length the limit still holds while reading.
    def chunks() -> Any:
        yield big.encode()

    with httpx.Client(timeout=10) as http:
        response = http.post(
            f"{server.base_url}/chat/completions",
            content=chunks(),
            headers={"content-type": "application/json"},
        )
    assert_error(response, 413)
    assert upstream.requests == []


def test_models_lists_the_configured_model(server: IrisServer) -> None:
    with OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10) as client:
        assert [m.id for m in client.models.list()] == ["fake-model", "iris-voice"]


def test_api_key_is_required_when_configured(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server(platforms={"api_server": {"api_key": "s3cret"}})
    for key in ("wrong", "s3cre", "s3cret-and-more"):
        with (
            OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=10) as client,
            pytest.raises(AuthenticationError) as caught,
        ):
            client.chat.completions.create(model="fake-model", messages=USER)
        assert caught.value.status_code == 401
    with httpx.Client(timeout=10) as http:
        assert_error(http.get(f"{server.base_url}/models"), 401)
    assert upstream.requests == []
    upstream.script(text("ok"))
    with OpenAI(base_url=server.base_url, api_key="s3cret", max_retries=0, timeout=10) as client:
        answer = client.chat.completions.create(model="fake-model", messages=USER)
    assert answer.choices[0].message.content == "ok"


def test_over_max_concurrent_is_429_with_retry_after(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server(platforms={"api_server": {"max_concurrent": 1}})
    upstream.script(hold("Hel"), text("next"))
    with OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10) as client:
        stream = client.chat.completions.create(model="fake-model", messages=USER, stream=True)
        chunks = iter(stream)
        next(chunks)
        assert next(chunks).choices[0].delta.content == "Hel"
        with pytest.raises(RateLimitError) as caught:
            client.chat.completions.create(model="fake-model", messages=USER)
        assert caught.value.response.headers["retry-after"] == "1"
        upstream.release()
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ""
        stream.close()
        # The slot is free again once the first turn ended.
        answer = client.chat.completions.create(model="fake-model", messages=USER)
        assert answer.choices[0].message.content == "next"


def test_a_bad_request_does_not_disturb_a_stream_in_flight(
    server: IrisServer, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Hel"))
    with OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10) as client:
        stream = client.chat.completions.create(model="fake-model", messages=USER, stream=True)
        chunks = iter(stream)
        next(chunks)
        assert next(chunks).choices[0].delta.content == "Hel"
        assert_error(post(server, "/chat/completions", "{"), 400)
        upstream.release()
        rest = list(chunks)
        assert rest[-1].choices[0].finish_reason == "stop"


def test_wrong_method_and_unknown_endpoint_are_openai_errors(server: IrisServer) -> None:
    with httpx.Client(timeout=10) as http:
        wrong = http.get(f"{server.base_url}/chat/completions")
        missing = http.post(f"{server.base_url}/embeddings", json={"input": "x"})
    assert_error(wrong, 405)
    assert wrong.headers["allow"] == "POST"
    assert assert_error(missing, 404)["code"] == "unknown_url"

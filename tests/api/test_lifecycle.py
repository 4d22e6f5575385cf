"""Who decides streaming, what an early upstream failure looks like, and what a client that
goes away does to the turn."""

from __future__ import annotations

import json
import socket

import httpx
import pytest
from openai import APIStatusError, OpenAI, RateLimitError

from iris.surfaces.api.exchange import TurnExchange
from tests.api.conftest import IrisServer, StartIris
from tests.fakes.upstream import FakeUpstream, error, gated, hold, text

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "hi"}]


def client_for(server: IrisServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10)


def raw_post(server: IrisServer, path: str, body: dict[str, object]) -> socket.socket:
    payload = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(
        f"POST /v1{path} HTTP/1.1\r\nhost: 127.0.0.1:{server.port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    return sock


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
@pytest.mark.parametrize(
    ("config_says", "client_says", "streams", "upstream_streams"),
    [
        (False, True, True, True),
        (True, False, False, True),
        # An absent `stream` is false, as on OpenAI: the SDKs omit it unless it is given.
        (True, None, False, True),
        (False, None, False, False),
    ],
)
def test_the_request_decides_the_reply_and_the_config_only_the_upstream(
    iris_server: StartIris,
    upstream: FakeUpstream,
    path: str,
    config_says: bool,
    client_says: bool | None,
    streams: bool,
    upstream_streams: bool,
) -> None:
    server = iris_server(streaming={"enabled": not config_says, "api_server": config_says})
    upstream.script(text("ok"))
    body: dict[str, object] = {"model": "fake-model"}
    body.update({"messages": USER} if path == "/chat/completions" else {"input": "hi"})
    if client_says is not None:
        body["stream"] = client_says
    sock = raw_post(server, path, body)
    with sock, sock.makefile("rb") as reply:
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += reply.readline()
    kind = b"text/event-stream" if streams else b"application/json"
    assert kind in head.lower()
    # The config still decides whether Iris streams from the provider meanwhile.
    assert upstream.wait_for_request().stream is upstream_streams


def test_sdk_calls_without_stream_get_json_on_a_streaming_config(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server(streaming={"enabled": True})
    upstream.script(text("Hel", "lo"), text("Hi", " there"))
    with client_for(server) as client:
        chat = client.chat.completions.create(model="fake-model", messages=USER)
        response = client.responses.create(model="fake-model", input="hi")
    assert chat.choices[0].message.content == "Hello"
    assert response.output_text == "Hi there"


def test_streamed_request_failing_before_any_output_gets_a_real_status(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    upstream.script(error(429, "slow down", retry_after=1.5), error(500, "upstream broke"))
    with client_for(server) as client:
        with pytest.raises(RateLimitError, match="slow down") as limited:
            client.chat.completions.create(model="fake-model", messages=USER, stream=True)
        # The provider's Retry-After reaches the client, so its own retry waits that long.
        assert limited.value.response.headers["retry-after"] == "2"
        assert limited.value.response.headers["retry-after-ms"] == "1500"
        with pytest.raises(APIStatusError) as caught:
            client.responses.create(model="fake-model", input="hi", stream=True)
    assert caught.value.status_code == 502
    assert "upstream broke" in caught.value.message


def test_non_streamed_upstream_failure_is_a_502(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    upstream.script(error(500, "upstream broke"), text("still here"))
    with client_for(server) as client:
        with pytest.raises(APIStatusError) as caught:
            client.chat.completions.create(model="fake-model", messages=USER)
        assert caught.value.status_code == 502
        again = client.chat.completions.create(model="fake-model", messages=USER)
    assert again.choices[0].message.content == "still here"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/chat/completions", {"messages": USER, "stream": False}),
        ("/responses", {"input": "hi", "stream": True}),
    ],
    ids=["chat-not-streamed", "responses-streamed"],
)
def test_a_client_that_leaves_closes_the_upstream_request(
    iris_server: StartIris, upstream: FakeUpstream, path: str, body: dict[str, object]
) -> None:
    server = iris_server()
    upstream.script(hold("Hel"))
    sock = raw_post(server, path, body)
    assert upstream.gate_reached.wait(10), "the turn never reached the upstream"
    sock.close()
    assert upstream.disconnected.wait(2.0), "the upstream request stayed open"  # 1 s + CI slack
    # The server is fine afterwards.
    upstream.script(text("ok"))
    with client_for(server) as client:
        answer = client.chat.completions.create(model="fake-model", messages=USER)
    assert answer.choices[0].message.content == "ok"


@pytest.mark.parametrize("before_first_output", [False, True], ids=["mid-stream", "before-output"])
def test_a_silent_stream_gets_keep_alive_comments(
    iris_server: StartIris,
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    before_first_output: bool,
) -> None:
    monkeypatch.setattr(TurnExchange, "heartbeat", 0.05)
    server = iris_server()
    upstream.script(gated("Hel", "lo", after=0 if before_first_output else 1))
    body = {"model": "fake-model", "messages": USER, "stream": True}
    lines: list[str] = []
    with (
        httpx.Client(timeout=10) as http,
        http.stream("POST", f"{server.base_url}/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        stream = response.iter_lines()
        for line in stream:
            lines.append(line)
            if line == ": keep-alive":
                break
        # The upstream is still at its gate: the comment is what kept the stream alive.
        assert not upstream.finished.is_set()
        upstream.release()
        lines.extend(stream)
    data = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in data if c["choices"])
    assert text == "Hello"
    assert [line for line in lines if line][-1] == "data: [DONE]"

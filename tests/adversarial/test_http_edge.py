"""Findings 2, 5 and 8 of the hardening review, replayed against the real ``iris serve``.

2. A web page made the default config run shell commands: a ``text/plain`` or form POST (a
   "simple" request a browser sends cross-site without asking) with a foreign ``Origin`` or a
   rebound ``Host`` reached the agent.
5. Sockets that never finish their request head were held forever: 500 trickling ones ≥ 41 s,
   300 silent ones ≥ 16 s; under a 256-file limit ``/health`` failed.
8. Limits covered one surface only: turns on the API and the iris socket are one budget.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from websockets.sync.client import connect

from tests.adversarial.conftest import StartServed
from tests.adversarial.connections import closed
from tests.fakes.upstream import FakeUpstream, hold, text, tool_call

pytestmark = pytest.mark.timeout(90)

BODY = json.dumps({"model": "fake-model", "messages": [{"role": "user", "content": "run it"}]})


def raw_request(url: str, head: str, body: str = BODY) -> tuple[int, str]:
    """One request as a browser or an attacker's script would write it; (status, body)."""
    parts = urlsplit(url)
    data = body.encode()
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(
            (head.format(hostport=parts.netloc) + f"Content-Length: {len(data)}\r\n\r\n").encode()
            + data
        )
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
            if b"\r\n\r\n" in received and len(received.split(b"\r\n\r\n", 1)[1]) >= 1:
                break
    status = int(received.split(b" ", 2)[1])
    return status, received.split(b"\r\n\r\n", 1)[1].decode(errors="replace")


@pytest.mark.parametrize(
    "head",
    [
        # What <form enctype="text/plain"> and fetch(..., {mode: "no-cors"}) send.
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {hostport}\r\n"
        "Content-Type: text/plain\r\nOrigin: http://evil.example\r\nConnection: close\r\n",
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {hostport}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\nConnection: close\r\n",
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {hostport}\r\n"
        "Content-Type: text/plain;charset=UTF-8\r\nConnection: close\r\n",
        # JSON, but from another site, or under a rebound name.
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {hostport}\r\n"
        "Content-Type: application/json\r\nOrigin: http://evil.example\r\nConnection: close\r\n",
        "POST /v1/chat/completions HTTP/1.1\r\nHost: evil.example:8642\r\n"
        "Content-Type: application/json\r\nConnection: close\r\n",
        "POST /v1/responses HTTP/1.1\r\nHost: rebind.evil.example\r\n"
        "Content-Type: text/plain\r\nConnection: close\r\n",
    ],
    ids=["text-plain", "form", "text-charset", "foreign-origin", "rebound-host", "rebound-resp"],
)
def test_a_web_page_cannot_reach_the_agent(
    served: StartServed, upstream: FakeUpstream, head: str
) -> None:
    # The model would call the terminal if it were asked at all.
    upstream.script(tool_call("terminal", {"command": "touch pwned"}), text("done"))
    _, url = served()
    status, body = raw_request(url, head)
    assert status in (403, 415)
    assert json.loads(body)["error"]["code"] in {
        "unsupported_media_type",
        "origin_not_allowed",
        "host_not_allowed",
    }
    assert upstream.requests == []


def test_without_a_key_the_api_offers_no_agent_tools(
    served: StartServed, upstream: FakeUpstream
) -> None:
    upstream.script(text("ok"))
    _, url = served()
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {hostport}\r\n"
        "Content-Type: application/json\r\nConnection: close\r\n"
    )
    status, _ = raw_request(url, head)
    assert status == 200
    assert not upstream.requests[0].body.get("tools")


@contextlib.contextmanager
def sockets(url: str, count: int) -> Iterator[list[socket.socket]]:
    parts = urlsplit(url)
    opened: list[socket.socket] = []
    try:
        for _ in range(count):
            opened.append(socket.create_connection((parts.hostname, parts.port), timeout=10))
        yield opened
    finally:
        for sock in opened:
            sock.close()


def health_ok(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("open_files", [None, 256], ids=["default-files", "256-files"])
def test_silent_and_trickling_sockets_are_closed_and_health_answers(
    served: StartServed, open_files: int | None
) -> None:
    _, url = served(server={"timeout_headers": 2, "timeout_keep_alive": 2}, open_files=open_files)
    with sockets(url, 300) as silent, sockets(url, 200) as trickling:
        for sock in trickling:
            sock.sendall(b"GET /health HTTP/1.1\r\n")
        healthy: list[bool] = []
        deadline = time.monotonic() + 30  # a hang guard, not a measurement
        while time.monotonic() < deadline:
            for sock in trickling:
                with contextlib.suppress(OSError):
                    sock.sendall(b"X-Slow: 1\r\n")  # a header line, never the blank line
            healthy.append(health_ok(url))
            if all(closed(s) for s in silent + trickling):
                break
            time.sleep(0.5)
        still_open = sum(not closed(s) for s in silent + trickling)
    assert still_open == 0, f"{still_open} of 500 sockets still held"
    assert healthy and all(healthy), f"/health failed {healthy.count(False)} of {len(healthy)}"
    assert health_ok(url)


def test_a_head_bigger_than_the_cap_is_closed(served: StartServed) -> None:
    _, url = served()
    with sockets(url, 1) as (sock,):
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        with contextlib.suppress(OSError):
            for _ in range(200):
                sock.sendall(b"X-Big: " + b"a" * 1000 + b"\r\n")
        sock.settimeout(10)
        with contextlib.suppress(OSError):
            while sock.recv(65536):
                pass
        assert closed(sock)


def test_max_turns_is_one_budget_for_the_api_and_the_iris_socket(
    served: StartServed, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Hel"), hold("Hi"))
    _, url = served(
        server={"max_turns": 1}, platforms={"iris": {"tokens": ["iris-device-token-t1"]}}
    )
    ws_url = url.replace("http://", "ws://") + "/iris/ws"
    with httpx.Client(timeout=10) as http, connect(ws_url, open_timeout=10) as device:
        device.send(json.dumps({"type": "hello", "token": "iris-device-token-t1"}))
        assert json.loads(device.recv(10))["type"] == "ready"
        # The API holds the one slot: the device is told busy at once.
        with http.stream(
            "POST", f"{url}/v1/chat/completions", json={**json.loads(BODY), "stream": True}
        ) as streamed:
            assert streamed.status_code == 200
            assert upstream.gate_reached.wait(10)
            device.send(json.dumps({"type": "message.send", "text": "hi"}))
            frames = [json.loads(device.recv(10))]
            while frames[-1]["type"] != "error":
                frames.append(json.loads(device.recv(10)))
            assert frames[-1]["code"] == "busy"
            upstream.release()
            streamed.read()
        # Now the device holds it: the API answers 429.
        upstream.reset_gate()
        device.send(json.dumps({"type": "message.send", "text": "hi again"}))
        assert upstream.wait_for_request(2)
        assert upstream.gate_reached.wait(10)
        refused = http.post(f"{url}/v1/chat/completions", content=BODY, headers=JSON)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too_many_turns"
        upstream.release()
    assert len(upstream.requests) == 2


JSON = {"content-type": "application/json"}


def test_a_body_that_trickles_is_408_and_an_open_socket_is_not_timed_out(
    served: StartServed, upstream: FakeUpstream
) -> None:
    _, url = served(
        server={"timeout_headers": 1, "timeout_body": 1},
        platforms={"iris": {"tokens": ["iris-device-token-t1"]}},
    )
    ws_url = url.replace("http://", "ws://") + "/iris/ws"
    with connect(ws_url, open_timeout=10) as device, sockets(url, 1) as (sock,):
        device.send(json.dumps({"type": "hello", "token": "iris-device-token-t1"}))
        assert json.loads(device.recv(10))["type"] == "ready"
        host = urlsplit(url).netloc
        sock.sendall(
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{".encode()
        )
        sock.settimeout(10)
        answer = sock.recv(65536)
        assert answer.split(b" ", 2)[1] == b"408"
        # The device's socket outlived the head deadline: it is not a request head any more.
        device.send(json.dumps({"type": "ping"}))
        assert json.loads(device.recv(10))["type"] == "pong"
    assert upstream.requests == []

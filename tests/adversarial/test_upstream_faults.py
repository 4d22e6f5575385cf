"""Finding 6 (faults that end wrong) and the SQLite half of finding 4, against the real
``iris serve``: every upstream fault and store failure ends with the surface's error form —
the API's JSON error (or in-band error after output), the iris socket's ``error`` frame and
``typing {on: false}`` — never a 200 that hides it, a traceback on the wire or a turn left open.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.adversarial.conftest import StartServed
from tests.fakes.served import Served, free_port, write_config
from tests.fakes.store_faults import exclusive_lock
from tests.fakes.upstream import (
    FakeUpstream,
    Scenario,
    empty_200,
    hang_after_first,
    html_200,
    lone_surrogate,
    not_sse_200,
    text,
)

pytestmark = pytest.mark.timeout(90)

TOKEN = "device-1-0123456789ab"
IRIS = {"iris": {"enabled": True, "tokens": [TOKEN]}}
STREAMING = {"enabled": True}
USER = [{"role": "user", "content": "hi"}]


def chat(url: str, *, stream: bool, content: str = "hi") -> httpx.Response:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": content}]}
    return httpx.post(f"{url}/v1/chat/completions", json={**body, "stream": stream}, timeout=30)


def responses(url: str, *, stream: bool, **extra: Any) -> httpx.Response:
    body = {"model": "fake-model", "input": "hi", "stream": stream, **extra}
    return httpx.post(f"{url}/v1/responses", json=body, timeout=30)


def assert_json_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == code
    assert "Traceback" not in response.text


def sse_data(response: httpx.Response) -> list[Any]:
    events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]", response.text
    return [json.loads(event) for event in events[:-1]]


async def iris_turn(url: str, text: str) -> list[dict[str, Any]]:
    """Send ``text`` from a device; the frames up to ``typing {on: false}``."""
    frames: list[dict[str, Any]] = []
    ws_url = url.replace("http://", "ws://") + "/iris/ws"
    async with connect(ws_url) as ws:
        await ws.send(json.dumps({"type": "hello", "token": TOKEN}))
        async with asyncio.timeout(30):
            assert json.loads(await ws.recv())["type"] == "ready"
            await ws.send(json.dumps({"type": "message.send", "text": text}))
            while True:
                raw = await ws.recv()
                assert isinstance(raw, str) and "Traceback" not in raw
                frames.append(json.loads(raw))
                if frames[-1]["type"] == "typing" and frames[-1]["on"] is False:
                    return frames


def errors(frames: list[dict[str, Any]]) -> list[str]:
    return [f["code"] for f in frames if f["type"] == "error"]


@pytest.mark.parametrize("garbage", [html_200, empty_200, not_sse_200])
async def test_a_200_that_is_not_an_answer_is_a_502_and_an_error_frame(
    served: StartServed, upstream: FakeUpstream, garbage: Callable[[], Scenario]
) -> None:
    _, url = served(streaming=STREAMING, platforms=IRIS)
    # A failed stream is asked once more without streaming: up to two requests per turn.
    upstream.script(*[garbage() for _ in range(8)])
    assert_json_error(chat(url, stream=False), 502, "provider_bad_response")
    assert_json_error(chat(url, stream=True), 502, "provider_bad_response")
    assert_json_error(responses(url, stream=True), 502, "provider_bad_response")
    frames = await iris_turn(url, "hello?")
    assert errors(frames) == ["provider_bad_response"]
    assert not [f for f in frames if f["type"] == "message.start"]  # nothing shown as a reply
    assert not upstream.unexpected


async def test_a_hang_after_the_first_chunk_fails_the_turn_once_within_the_deadline(
    served: StartServed, upstream: FakeUpstream
) -> None:
    _, url = served(streaming=STREAMING, platforms=IRIS, model={"timeout": 1})
    try:
        upstream.script(hang_after_first())
        chunks = sse_data(chat(url, stream=True))
        assert chunks[-1]["error"]["code"] == "provider_timeout"  # after output: in-band
        upstream.script(hang_after_first())
        assert_json_error(chat(url, stream=False), 502, "provider_timeout")
        upstream.script(hang_after_first())
        frames = await iris_turn(url, "hello?")
        assert errors(frames) == ["provider_timeout"]
        stop = next(f for f in frames if f["type"] == "message.stop")
        assert stop["final_text"] == "Hel"
        assert len(upstream.requests) == 3  # no retry doubled any deadline
    finally:
        upstream.release()


async def test_lone_surrogates_from_the_model_or_the_user_end_cleanly(
    served: StartServed, upstream: FakeUpstream
) -> None:
    _, url = served(streaming=STREAMING, platforms=IRIS)
    upstream.script(lone_surrogate(), lone_surrogate(), text("fine"))
    frames = await iris_turn(url, "hello?")
    stop = next(f for f in frames if f["type"] == "message.stop")
    assert stop["final_text"] == "Hi \ufffd there"
    assert errors(frames) == []
    chunks = sse_data(chat(url, stream=True))
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    # A lone surrogate in the user's text (a JSON escape) reaches the upstream repaired.
    raw = b'{"model": "fake-model", "stream": false,'
    raw += b' "messages": [{"role": "user", "content": "a \\ud800 b"}]}'
    answer = await asyncio.to_thread(
        httpx.post,
        f"{url}/v1/chat/completions",
        content=raw,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "fine"
    assert "a \ufffd b" in json.dumps(upstream.requests[-1].body, ensure_ascii=False)


def test_a_locked_database_is_a_503_while_health_still_answers(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = served(store={"busy_timeout": 2})
    upstream.script(text("stored?"))
    done = threading.Event()
    result: list[httpx.Response] = []

    def ask() -> None:
        result.append(responses(url, stream=False))
        done.set()

    with exclusive_lock(tmp_path / "iris.db"):
        asker = threading.Thread(target=ask)
        asker.start()
        assert upstream.finished.wait(10)  # the turn ended; saving it waits for the lock
        answered_while_waiting = 0
        while not done.is_set():
            health = httpx.get(f"{url}/health", timeout=5)
            assert health.status_code == 200
            answered_while_waiting += not done.is_set()
        asker.join(10)
    assert answered_while_waiting > 0
    assert_json_error(result[0], 503, "store_unavailable")


async def test_a_locked_database_ends_an_iris_turn_with_an_error_frame(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = served(store={"busy_timeout": 1}, platforms=IRIS)
    upstream.script(text("not saved"))
    with exclusive_lock(tmp_path / "iris.db"):
        frames = await iris_turn(url, "hello?")
    assert "store_unavailable" in errors(frames)


def test_a_read_only_database_stops_serve_with_one_line(
    served: StartServed,
    upstream: FakeUpstream,
    tmp_path: Path,
    read_only: Callable[[Path], None],
) -> None:
    server, _ = served()  # creates the database
    server.stop()
    read_only(tmp_path / "iris.db")
    again = Served(write_config(tmp_path, upstream.base_url, free_port()))
    try:
        assert again.process.wait(30) != 0
    finally:
        again.stop()
    lines = [line for line in again.drain() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("iris: cannot write the store"), lines


def test_a_deleted_database_is_reported_and_answers_503(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    server, url = served()
    (tmp_path / "iris.db").unlink()
    upstream.script(text("stored?"))
    assert_json_error(responses(url, stream=False), 503, "store_unavailable")
    server.wait_for("was deleted or replaced")

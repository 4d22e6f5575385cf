"""Redis lost while ``iris serve`` runs: ``/health`` says so with a 503 (a load balancer drains
the node), nothing answers 500 or hangs, and service resumes by itself when Redis returns."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest
from openai import APIStatusError, OpenAI

from tests.fakes.served import serve
from tests.fakes.upstream import FakeUpstream, text
from tests.scale.conftest import RedisServer

pytestmark = pytest.mark.timeout(90)


def ask(url: str, prompt: str) -> str:
    with OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=15) as client:
        reply = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": prompt}]
        )
    return reply.choices[0].message.content or ""


def test_health_drains_the_node_while_redis_is_away_and_recovers_when_it_returns(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    store = {"url": redis_server.url, "path": str(tmp_path / "iris.db")}
    server, url = serve(tmp_path, upstream.base_url, store=store)
    try:
        with httpx.Client(base_url=url, timeout=10) as http:
            health = http.get("/health")
            assert health.status_code == 200 and health.json()["store"] == "ok"

            redis_server.stop()
            away = http.get("/health")
            assert away.status_code == 503
            assert away.json()["status"] == "unavailable" and away.json()["store"] == "unavailable"
            # What needs no shared state still works: the node is drained, not broken.
            upstream.script(text("still here"))
            assert ask(url, "hi") == "still here"

            redis_server.start()
            back = http.get("/health")  # the client reconnects by itself, at the first call
            assert back.status_code == 200 and back.json()["store"] == "ok"
        log = server.drain()
        assert not any("Traceback" in line for line in log), log
    finally:
        server.stop()


def test_health_without_a_shared_store_is_as_before(tmp_path: Path, upstream: FakeUpstream) -> None:
    server, url = serve(tmp_path, upstream.base_url)
    try:
        health = httpx.get(f"{url}/health", timeout=10)
        assert health.status_code == 200 and "store" not in health.json()
    finally:
        server.stop()


def test_health_answers_503_when_redis_hangs_instead_of_hanging_itself(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    """A Redis that accepts nothing and answers nothing (paused): /health gives up after the
    store's timeout and says so; it is 200 again once Redis answers."""
    store = {"url": redis_server.url, "path": str(tmp_path / "iris.db")}
    server, url = serve(tmp_path, upstream.base_url, store=store)
    assert redis_server.process is not None
    try:
        with httpx.Client(base_url=url, timeout=15) as http:
            assert http.get("/health").status_code == 200
            redis_server.process.send_signal(signal.SIGSTOP)
            try:
                away = http.get("/health")
            finally:
                redis_server.process.send_signal(signal.SIGCONT)
            assert away.status_code == 503 and away.json()["store"] == "unavailable"
            assert http.get("/health").status_code == 200
    finally:
        server.stop()


def test_stored_responses_answer_503_while_redis_is_away_and_nothing_stored_is_lost(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    """A request that needs the shared store gets 503 ``store_unavailable`` (not a 500, not a
    hang) while Redis is away; what Redis acknowledged before is there when it returns."""
    store = {"url": redis_server.url, "path": str(tmp_path / "iris.db")}
    server, url = serve(tmp_path, upstream.base_url, store=store)
    try:
        with OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=15) as client:
            upstream.script(text("kept"))
            first = client.responses.create(model="fake-model", input="remember this")

            redis_server.stop()
            with pytest.raises(APIStatusError) as refused:
                client.responses.retrieve(first.id)
            assert refused.value.status_code == 503
            assert isinstance(refused.value.body, dict)
            assert refused.value.body.get("code") == "store_unavailable"
            asked = len(upstream.requests)
            with pytest.raises(APIStatusError) as continued:
                client.responses.create(
                    model="fake-model", input="and this?", previous_response_id=first.id
                )
            assert continued.value.status_code == 503
            assert len(upstream.requests) == asked  # refused before the model was asked

            redis_server.start()
            assert client.responses.retrieve(first.id).output_text == "kept"
            upstream.script(text("continued"))
            again = client.responses.create(
                model="fake-model", input="and this?", previous_response_id=first.id
            )
            assert again.output_text == "continued"
            sent = upstream.requests[-1].body["messages"]
            assert [m["content"] for m in sent][-3:] == ["remember this", "kept", "and this?"]
        log = server.drain()
        assert not any("Traceback" in line for line in log), log
    finally:
        server.stop()

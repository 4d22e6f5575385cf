"""Finding 10 of the second pass, the smaller items: allowed users matched by a user name that
can change hands; a 100 000-character chat message reaching the model; an idle chat keeping
frames past ``log_max_age``; ``/health`` green while Redis refuses writes; a bad ``after_seq``
closing as ``unauthorized``; answers without ``nosniff``."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from iris.fanout.framelog import SqliteFrameLog
from iris.fanout.hub import Hub
from iris.fanout.redis_log import RedisFrameLog
from iris.protocol.types import RULES
from iris.state.redis_store import RedisStore
from iris.state.sqlite import Store
from iris.surfaces.chat.platforms.base import IncomingMessage
from tests.adversarial.conftest import StartServed
from tests.chat.conftest import Gateway, gateway  # noqa: F401  (fixture)
from tests.conftest import MakeConfig  # noqa: F401
from tests.fakes.upstream import FakeUpstream, text
from tests.scale.conftest import RedisServer, redis_server, serve_on_redis  # noqa: F401

TOKEN = "device-token-smaller-0123456789"


async def test_a_user_name_is_not_an_allowed_user_without_the_opt_in(
    gateway: Gateway,  # noqa: F811
    upstream: FakeUpstream,
) -> None:
    # "@friend" was given up and taken by user 99: by default only ids are matched.
    surface, platform = await gateway(allowed=[7, "@friend"])
    await platform.deliver(IncomingMessage("telegram", "c9", "99", "hi", user_name="friend"))
    await surface.idle()
    assert upstream.requests == []
    assert "private" in platform.chat()[0]


async def test_user_names_match_with_the_documented_opt_in(
    gateway: Gateway,  # noqa: F811
    upstream: FakeUpstream,
) -> None:
    upstream.script(text("Hello"))
    surface, platform = await gateway(allowed=["@Friend"], telegram={"match_usernames": True})
    await platform.deliver(IncomingMessage("telegram", "c9", "99", "hi", user_name="friend"))
    await surface.idle()
    assert len(upstream.requests) == 1


async def test_a_huge_chat_message_never_reaches_the_model(
    gateway: Gateway,  # noqa: F811
    upstream: FakeUpstream,
) -> None:
    surface, platform = await gateway()
    await platform.deliver(IncomingMessage("telegram", "c1", "7", "x" * 100_000))
    await surface.idle()
    assert upstream.requests == []
    (note,) = platform.chat()
    assert "100000 characters" in note and "32000" in note


def old_chat(hub: Hub, now: list[float]) -> None:
    hub.publish("idle", {"type": "message", "message_id": "u1", "role": "user", "text": "hi"})
    hub.publish("idle", {"type": "typing", "on": False})
    now[0] += 3600  # an hour later, nobody wrote to the chat again


async def test_an_idle_chat_is_trimmed_past_its_max_age_on_sqlite(tmp_path: Path) -> None:
    now = [1_000_000.0]
    store = Store(tmp_path / "iris.db")
    log = SqliteFrameLog(store, rules=RULES, max_age=60, clock=lambda: now[0])
    try:
        hub = Hub(log)
        old_chat(hub, now)
        assert len(log.after("idle", 0, 100)) == 2  # no append came to trim it
        assert await log.prune_idle() == 1
        assert log.after("idle", 0, 100) == [] and log.floor("idle") == 2
    finally:
        store.close()


async def test_an_idle_chat_is_trimmed_past_its_max_age_on_redis(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    now = [1_000_000.0]
    store = RedisStore(redis_server.url)
    try:
        log = RedisFrameLog(store, rules=RULES, max_age=60, clock=lambda: now[0])
        hub = Hub(log)
        old_chat(hub, now)
        assert len(log.after("idle", 0, 100)) == 2
        assert await log.prune_idle() >= 1
        assert log.after("idle", 0, 100) == [] and log.floor("idle") == 2
    finally:
        store.close()


def test_health_fails_when_redis_refuses_writes(
    tmp_path: Path,
    upstream: FakeUpstream,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    with serve_on_redis(tmp_path, upstream.base_url, redis_server, ("a",)) as running:
        _, url = running[0]
        assert httpx.get(f"{url}/health", timeout=10).json()["store"] == "ok"
        probe = redis_server.client()
        try:
            probe.config_set("maxmemory-policy", "noeviction")
            probe.config_set("maxmemory", 1)  # every write refused (OOM); PING still answers
            assert probe.ping()
            health = httpx.get(f"{url}/health", timeout=10)
            assert health.status_code == 503 and health.json()["store"] == "unavailable"
            probe.config_set("maxmemory", 0)
            assert httpx.get(f"{url}/health", timeout=10).status_code == 200
        finally:
            probe.close()


async def test_a_bad_after_seq_in_hello_is_not_unauthorized(served: StartServed) -> None:
    _, url = served(platforms={"iris": {"enabled": True, "tokens": [TOKEN]}})
    async with connect(url.replace("http://", "ws://") + "/iris/ws", open_timeout=10) as ws:
        await ws.send(json.dumps({"type": "hello", "token": TOKEN, "after_seq": -3}))
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4400 and "after_seq" in closed.value.rcvd.reason


def test_every_answer_says_nosniff(served: StartServed) -> None:
    _, url = served(
        platforms={"iris": {"enabled": True, "tokens": [TOKEN]}, "api_server": {"api_key": TOKEN}}
    )
    with httpx.Client(base_url=url, timeout=10) as client:
        for path in ("/js/nope.js", "/health", "/v1/models", "/nowhere", "/iris/chats", "/"):
            answer = client.get(path)
            assert answer.headers.get("x-content-type-options") == "nosniff", path

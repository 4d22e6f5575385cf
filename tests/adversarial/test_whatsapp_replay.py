"""Finding 11 of the third hardening pass, its WhatsApp items: a signed body replayed after a
restart ran a turn again (the dedupe lived in one process's memory, ``timestamp`` was never
checked), and a signed body 100 000 levels deep was a 500 with a ``RecursionError``.

Taken message ids now live in the server's state — here Redis, shared by two ``iris serve``
processes, as a load balancer would hand Meta's redelivery to the other one — and a message
older than ``platforms.whatsapp.max_age`` is not answered at all.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from iris.surfaces.chat.platforms.whatsapp import WEBHOOK_PATH
from tests.fakes.served import Served, serve
from tests.fakes.upstream import FakeUpstream, text
from tests.fakes.whatsapp_api import WhatsAppAPI
from tests.scale.conftest import RedisServer, redis_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.timeout(90)

OWNER = "15550001111"


@pytest.fixture
async def api() -> AsyncIterator[WhatsAppAPI]:
    async with WhatsAppAPI(pair_every=0.0) as fake:
        yield fake


def whatsapp(api: WhatsAppAPI) -> dict[str, Any]:
    return {
        "enabled": True,
        "base_url": api.base_url,
        "phone_number_id": api.phone_number_id,
        "access_token": api.token,
        "app_secret": api.app_secret,
        "allowed_users": [OWNER],
        "max_age": 600,
    }


async def start(tmp_path: Path, upstream: FakeUpstream, api: WhatsAppAPI, **more: Any) -> Any:
    # The start checks the token against the stand-in, which this loop serves: wait aside.
    return await asyncio.to_thread(
        serve,
        tmp_path,
        upstream.base_url,
        platforms={"iris": {"enabled": False}, "whatsapp": whatsapp(api)},
        **more,
    )


async def test_a_redelivery_to_another_process_is_answered_once(
    tmp_path: Path,
    upstream: FakeUpstream,
    api: WhatsAppAPI,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    upstream.script(text("only once"))
    running: list[Served] = []
    try:
        urls: list[str] = []
        for name in ("a", "b"):
            store = {"url": redis_server.url, "path": str(tmp_path / f"{name}.db")}
            server, url = await start(tmp_path, upstream, api, name=f"{name}.yaml", store=store)
            running.append(server)
            urls.append(url + WEBHOOK_PATH)
        event = api.event(OWNER, "hi", "wamid.redelivered.1")
        assert await api.deliver(urls[0], event) == 200
        assert await api.deliver(urls[1], event) == 200  # Meta's retry, through the other
        await api.wait_until(lambda: api.texts_to(OWNER) == ["only once"])
        assert await api.deliver(urls[1], event) == 200
        assert await api.deliver(urls[0], event) == 200
        # A message after them is answered: the redeliveries started nothing in between.
        upstream.script(text("next"))
        await api.user_says(urls[1], OWNER, "and this?")
        await api.wait_until(lambda: api.texts_to(OWNER) == ["only once", "next"])
    finally:
        for server in running:
            server.stop()
    assert [r.body["messages"][-1]["content"] for r in upstream.requests] == ["hi", "and this?"]


async def test_a_signed_body_replayed_after_a_restart_is_not_answered_again(
    tmp_path: Path, upstream: FakeUpstream, api: WhatsAppAPI
) -> None:
    upstream.script(text("only once"))
    event = api.event(OWNER, "hi", "wamid.restart.1")
    server, url = await start(tmp_path, upstream, api)
    try:
        assert await api.deliver(url + WEBHOOK_PATH, event) == 200
        await api.wait_until(lambda: api.texts_to(OWNER) == ["only once"])
    finally:
        server.stop()
    server, url = await start(tmp_path, upstream, api)  # the same SQLite file
    try:
        assert await api.deliver(url + WEBHOOK_PATH, event) == 200
        upstream.script(text("next"))
        await api.user_says(url + WEBHOOK_PATH, OWNER, "and this?")
        await api.wait_until(lambda: api.texts_to(OWNER) == ["only once", "next"])
    finally:
        server.stop()
    assert [r.body["messages"][-1]["content"] for r in upstream.requests] == ["hi", "and this?"]


async def test_a_signed_message_older_than_max_age_is_not_answered(
    tmp_path: Path, upstream: FakeUpstream, api: WhatsAppAPI
) -> None:
    upstream.script(text("fresh"))
    server, url = await start(tmp_path, upstream, api)
    try:
        old = api.event(OWNER, "replayed", "wamid.old.1")
        old["entry"][0]["changes"][0]["value"]["messages"][0]["timestamp"] = str(
            int(time.time()) - 3600
        )
        assert await api.deliver(url + WEBHOOK_PATH, old) == 200  # taken: Meta must not retry
        await api.user_says(url + WEBHOOK_PATH, OWNER, "fresh one")
        await api.wait_until(lambda: api.texts_to(OWNER) == ["fresh"])
    finally:
        server.stop()
    assert [r.body["messages"][-1]["content"] for r in upstream.requests] == ["fresh one"]


async def test_a_signed_body_nested_100_000_deep_is_400(
    tmp_path: Path, upstream: FakeUpstream, api: WhatsAppAPI
) -> None:
    server, url = await start(tmp_path, upstream, api)
    try:
        body = b"[" * 100_000 + b"]" * 100_000
        headers = {"content-type": "application/json", "x-hub-signature-256": api.signature(body)}
        async with httpx.AsyncClient() as client:
            answer = await client.post(url + WEBHOOK_PATH, content=body, headers=headers)
            health = await client.get(url + "/health")
    finally:
        server.stop()
    assert answer.status_code == 400
    assert health.status_code == 200
    assert not any("RecursionError" in line for line in server.drain())

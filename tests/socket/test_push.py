"""Web Push from ``iris serve`` to a push service stand-in over a real socket: the VAPID JWT is
checked and the payload decrypted with the subscription's own keys (RFC 8291/8292), as a
browser's push service and the browser would."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from iris.surfaces.socket.notifier import KEY_FILE
from tests.fakes.push_service import PushService
from tests.fakes.upstream import FakeUpstream, gated, text
from tests.socket.conftest import IrisServer, StartServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def service() -> AsyncIterator[PushService]:
    async with PushService() as running:
        yield running


async def subscribed(server: IrisServer, chat: str) -> int:
    """How many push subscriptions the server keeps for ``chat`` (read from its store)."""
    push = server.surface.runtime.push
    assert push is not None
    return len(await push.of_chat(chat))


def private_key_file(server: IrisServer) -> int:
    """The mode of the server's VAPID key file."""
    path = Path(server.config.store.resolved_path().parent) / KEY_FILE
    return stat.S_IMODE(path.stat().st_mode)


async def until_subscribed(server: IrisServer, chat: str, count: int = 1) -> None:
    async with asyncio.timeout(10):
        while True:  # the frame has no answer: the store says when it was kept
            if await subscribed(server, chat) == count:
                return
            await asyncio.sleep(0.05)


async def test_a_reply_that_finishes_with_no_device_connected_is_pushed_encrypted(
    iris_server: StartServer, upstream: FakeUpstream, service: PushService
) -> None:
    server = await iris_server(streaming={"enabled": True})
    http_url = server.url.replace("ws://", "http://").removesuffix("/iris/ws")
    async with httpx.AsyncClient() as client:
        key = (await client.get(f"{http_url}/iris/push.json")).json()
    assert key["enabled"] and len(key["public_key"]) == 87  # a P-256 point, base64url
    assert await asyncio.to_thread(private_key_file, server) == 0o600  # made at first run

    device = await server.connect(chat_id="away")
    browser = service.browser("phone")
    await device.send({"type": "push.subscribe", "subscription": browser.subscription()})
    await until_subscribed(server, "away")

    upstream.script(gated("Your build ", "passed.\nAll 112 tests green.", after=1))
    await device.send({"type": "message.send", "text": "tell me when the build is done"})
    await device.until("message.update")
    await device.close()  # the person puts the phone away mid-reply
    upstream.release()

    (pushed,) = await service.wait_for(1)
    assert pushed["to"] == "phone" and pushed["chat_id"] == "away"
    assert pushed["title"] == "Iris"
    assert pushed["body"] == "Your build passed."  # the first line only
    assert pushed["message_id"].startswith("m_")
    assert service.server_keys == [key["public_key"]]  # signed with the key the page got


async def test_a_reply_seen_on_a_device_is_not_pushed_and_a_gone_subscription_is_dropped(
    iris_server: StartServer, upstream: FakeUpstream, service: PushService
) -> None:
    server = await iris_server(streaming={"enabled": True})
    device = await server.connect(chat_id="here")
    browser = service.browser("laptop")
    await device.send({"type": "push.subscribe", "subscription": browser.subscription()})
    await until_subscribed(server, "here")

    upstream.script(text("Seen it."))
    await device.send({"type": "message.send", "text": "hi"})
    await device.turn()
    assert service.received == []  # its device showed it: no notification

    service.answer(410)  # the browser unsubscribed: the push service forgot it
    upstream.script(text("Done."))
    await device.send({"type": "message.send", "text": "/remind in 1s check the oven"})
    await device.until("command")
    await service.wait_for(1)  # a scheduled run is always pushed
    await until_subscribed(server, "here", 0)  # 410: dropped
    assert service.received[0]["title"] == "⏰ Scheduled run"


async def test_a_subscription_to_a_plain_http_host_elsewhere_is_refused(
    iris_server: StartServer,
) -> None:
    server = await iris_server()
    device = await server.connect(chat_id="c")
    subscription = {"endpoint": "http://10.0.0.7/push/x", "keys": {"p256dh": "a", "auth": "b"}}
    await device.send({"type": "push.subscribe", "subscription": subscription})
    (error,) = [f for f in await device.until("error") if f["type"] == "error"]
    assert error["code"] == "bad_field" and "https" in error["message"]
    await device.send({"type": "push.subscribe", "subscription": {"endpoint": 5}})
    (error,) = [f for f in await device.until("error") if f["type"] == "error"]
    assert error["code"] in ("bad_field", "missing_field")
    assert await subscribed(server, "c") == 0

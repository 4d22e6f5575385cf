"""Finding 1 of the third hardening pass, replayed against the real ``iris serve``.

The WhatsApp webhook read its body with no deadline, before the signature check: 1 000
unauthenticated POSTs declaring ``Content-Length: 900000`` and sending a byte every 5 s held
every connection the cap allowed, and every new connection — ``/health``, the API, the iris
socket — was reset for over a minute. Every body now has one deadline (``server.timeout_body``,
408) and its route's cap (413 before reading when declared), and a connection still sending
its body is one the connection cap may evict.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import openai
import pytest
from websockets.exceptions import WebSocketException
from websockets.sync.client import connect

from iris.surfaces.chat.platforms.whatsapp import WEBHOOK_PATH
from tests.adversarial.connections import closed
from tests.fakes.served import Served, serve
from tests.fakes.upstream import FakeUpstream
from tests.fakes.whatsapp_api import WhatsAppAPI

pytestmark = pytest.mark.timeout(120)

TOKEN = "iris-device-token-bodies"
TRICKLERS = 1000


@pytest.fixture
async def whatsapp() -> AsyncIterator[WhatsAppAPI]:
    async with WhatsAppAPI() as api:
        yield api


async def served_with_whatsapp(
    tmp_path: Path, upstream: FakeUpstream, api: WhatsAppAPI, **server: Any
) -> tuple[Served, str]:
    platforms = {
        "iris": {"tokens": [TOKEN]},
        "whatsapp": {
            "enabled": True,
            "base_url": api.base_url,
            "phone_number_id": api.phone_number_id,
            "access_token": api.token,
            "app_secret": api.app_secret,
            "allowed_users": ["15550001111"],
        },
    }
    # The start checks the token against the stand-in, which this loop serves: wait aside.
    return await asyncio.to_thread(
        serve, tmp_path, upstream.base_url, platforms=platforms, server=server
    )


def trickler(url: str, path: str) -> socket.socket:
    """A POST whose head is whole and whose 900 000-byte body has not come yet."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
        "X-Hub-Signature-256: sha256=00\r\nContent-Length: 900000\r\n\r\n{".encode()
    )
    sock.settimeout(None)  # blocking: ``closed`` peeks without waiting, a byte sends at once
    return sock


def answer(sock: socket.socket) -> bytes:
    """All the server sends until it closes the connection (each refusal closes it)."""
    sock.settimeout(10)
    received = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            received += chunk
    return received


def answers(url: str) -> dict[str, bool]:
    """Does each surface answer a new connection: /health, the API (the SDK), the socket?"""
    seen: dict[str, bool] = {}
    try:
        seen["health"] = httpx.get(f"{url}/health", timeout=10).status_code == 200
    except httpx.HTTPError:
        seen["health"] = False
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=10)
    try:
        seen["api"] = any(m.id == "fake-model" for m in client.models.list())
    except openai.OpenAIError:
        seen["api"] = False
    finally:
        client.close()
    try:
        with connect(url.replace("http://", "ws://") + "/iris/ws", open_timeout=10) as device:
            device.send(json.dumps({"type": "hello", "token": TOKEN}))
            seen["socket"] = json.loads(device.recv(10))["type"] == "ready"
    except (OSError, TimeoutError, ValueError, WebSocketException):
        seen["socket"] = False
    return seen


def flood(url: str, rounds: int = 3) -> list[dict[str, bool]]:
    """1 000 tricklers (half on the webhook, half on ``/v1/responses``), each sending one byte
    a round and reconnecting when closed, as an attacker would; the surfaces probed each
    round. Bounded: ``rounds`` rounds, every socket closed at the end."""
    paths = [WEBHOOK_PATH, "/v1/responses"]
    socks = [trickler(url, paths[i % 2]) for i in range(TRICKLERS)]
    seen: list[dict[str, bool]] = []
    try:
        for _ in range(rounds):
            for i, sock in enumerate(socks):
                try:
                    if closed(sock):
                        raise ConnectionResetError
                    sock.sendall(b" ")
                except OSError:
                    sock.close()
                    with contextlib.suppress(OSError):
                        socks[i] = trickler(url, paths[i % 2])
            seen.append(answers(url))
    finally:
        for sock in socks:
            sock.close()
    return seen


async def test_a_thousand_trickling_bodies_leave_health_the_api_and_the_socket_answering(
    tmp_path: Path, upstream: FakeUpstream, whatsapp: WhatsAppAPI
) -> None:
    server, url = await served_with_whatsapp(tmp_path, upstream, whatsapp)
    try:
        seen = await asyncio.to_thread(flood, url)
    finally:
        server.stop()
    assert all(all(probe.values()) for probe in seen), seen
    assert upstream.requests == []


async def test_a_webhook_body_that_trickles_is_408_and_one_declared_too_large_is_413(
    tmp_path: Path, upstream: FakeUpstream, whatsapp: WhatsAppAPI
) -> None:
    server, url = await served_with_whatsapp(
        tmp_path, upstream, whatsapp, timeout_headers=1, timeout_body=1
    )

    def attack() -> tuple[bytes, bytes, bytes]:
        with trickler(url, WEBHOOK_PATH) as slow:
            timed_out = answer(slow)
        parts = urlsplit(url)
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as big:
            # Declared past the webhook's 1 MB cap: refused before a byte of it is sent.
            big.sendall(
                f"POST {WEBHOOK_PATH} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                "Content-Length: 2000000\r\n\r\n".encode()
            )
            too_large = answer(big)
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as chunked:
            # No length declared: cut off when it grows past the cap.
            chunked.sendall(
                f"POST {WEBHOOK_PATH} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                "Transfer-Encoding: chunked\r\n\r\n".encode()
            )
            with contextlib.suppress(OSError):
                for _ in range(20):
                    chunked.sendall(b"10000\r\n" + b"x" * 0x10000 + b"\r\n")
            grown = answer(chunked)
        return timed_out, too_large, grown

    try:
        timed_out, too_large, grown = await asyncio.to_thread(attack)
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{url}/health")).status_code == 200
    finally:
        server.stop()
    assert timed_out.split(b" ", 2)[1] == b"408", timed_out
    assert b"request_timeout" in timed_out
    assert too_large.split(b" ", 2)[1] == b"413", too_large
    assert grown.split(b" ", 2)[1] == b"413", grown
    assert upstream.requests == []

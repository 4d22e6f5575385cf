"""Web Push to the web app: the server's VAPID key, the encrypted payload, the push service's
answer.

The VAPID key pair (RFC 8292) is made at the first run and kept in Iris's private files
(``vapid.pem`` beside the store's database, 0600 from its first byte); the web app subscribes
with its public half (``GET /iris/push.json``). A notification's payload is a small JSON object
— a title, the first line of the text (at most ``BODY_MAX`` characters), the chat and message
to open — encrypted for the subscription's keys as RFC 8291 requires (``aes128gcm``, by
``pywebpush``), and sent with httpx to the push service. A subscription the push service
answers 404 or 410 is gone: it is dropped. Nothing else of the chat leaves the server: no tool
arguments, no whole replies.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import time
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import httpx
from cryptography.hazmat.primitives import serialization
from py_vapid import Vapid02  # pyright: ignore[reportMissingTypeStubs]

from iris.private import private_dir, write_private_bytes
from iris.state.push import PushSubscription, PushSubscriptions

log = logging.getLogger(__name__)

KEY_FILE = "vapid.pem"
BODY_MAX = 120  # characters of the first line a notification shows
GONE = frozenset({404, 410})  # the push service forgot the subscription: drop it
TTL = 24 * 3600  # seconds the push service keeps a notification for a browser that is away
CONTACT = "mailto:iris@localhost"  # the VAPID "sub" claim: who runs this server


def vapid_key(folder: Path) -> Any:
    """The server's VAPID key, made at the first run (0600 from its first byte)."""
    private_dir(folder)
    path = folder / KEY_FILE
    if not path.exists():
        made: Any = Vapid02()
        made.generate_keys()
        with contextlib.suppress(FileExistsError):  # another process made it first
            write_private_bytes(path, made.private_pem())
    return cast(Any, Vapid02).from_file(str(path))


def application_server_key(vapid: Any) -> str:
    """The public key a browser subscribes with (base64url, an uncompressed P-256 point)."""
    raw: bytes = vapid.public_key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def allowed_endpoint(endpoint: str) -> bool:
    """A push service is reached over https (plain http only on this machine, for tests)."""
    parts = urlsplit(endpoint)
    if parts.scheme == "https" and parts.hostname:
        return True
    return parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")


def first_line(text: str) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= BODY_MAX else line[: BODY_MAX - 1] + "…"


class Notifier:
    """Sends a chat's notifications to every browser subscribed to it."""

    def __init__(self, subscriptions: PushSubscriptions, vapid: Any) -> None:
        self.subscriptions = subscriptions
        self.vapid = vapid
        self.public_key = application_server_key(vapid)

    async def notify(self, chat: str, title: str, text: str, message_id: str = "") -> int:
        """Push to the chat's subscriptions; how many push services took it."""
        payload = {
            "title": title,
            "body": first_line(text),
            "chat_id": chat,
            "message_id": message_id,
        }
        data = json.dumps(payload).encode()
        sent = 0
        async with httpx.AsyncClient(timeout=10) as client:
            for subscription in await self.subscriptions.of_chat(chat):
                sent += await self._send(client, subscription, data)
        return sent

    async def _send(self, client: httpx.AsyncClient, s: PushSubscription, data: bytes) -> bool:
        if not allowed_endpoint(s.endpoint):
            return False
        # pywebpush brings requests with it (a twentieth of a second of every start): it loads
        # with the first notification, not with the server.
        from pywebpush import WebPusher  # pyright: ignore[reportMissingTypeStubs]

        body: bytes = WebPusher(s.subscription).encode(data, "aes128gcm")["body"]
        parts = urlsplit(s.endpoint)
        claims: dict[str, Any] = {
            "sub": CONTACT,
            "aud": f"{parts.scheme}://{parts.netloc}",
            "exp": int(time.time()) + 12 * 3600,
        }
        headers = {
            **self.vapid.sign(claims),
            "Content-Encoding": "aes128gcm",
            "Content-Type": "application/octet-stream",
            "TTL": str(TTL),
        }
        try:
            answer = await client.post(s.endpoint, content=body, headers=headers)
        except httpx.HTTPError as exc:
            log.warning("push to %s failed: %s", parts.netloc, exc)
            return False
        if answer.status_code in GONE:
            log.info("push subscription of %s gone (%d): dropped", s.device, answer.status_code)
            await self.subscriptions.remove(s.endpoint)
            return False
        if answer.status_code >= 400:
            log.warning("push to %s refused: %d", parts.netloc, answer.status_code)
            return False
        return True

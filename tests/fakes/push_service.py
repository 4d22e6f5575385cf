"""A Web Push service stand-in over a real socket, and a browser's subscription to it.

``PushService`` takes ``POST /push/<id>`` as a push service does and checks what the spec asks
of the sender, independently of the library that sent it: the VAPID JWT (RFC 8292: ES256 over
the server's public key ``k``, ``aud`` the service's origin, ``exp`` within 24 h, a ``sub``)
and the payload, decrypted with the subscription's own private key and auth secret (RFC 8291,
``aes128gcm``). ``answer`` sets the status the next pushes get (410: the subscription is gone).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

import http_ece  # pyright: ignore[reportMissingTypeStubs]
from aiohttp import web
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Browser:
    """A browser's push subscription: its key pair and auth secret (RFC 8291)."""

    endpoint: str
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    def subscription(self) -> dict[str, Any]:
        public = self.key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return {
            "endpoint": self.endpoint,
            "keys": {"p256dh": b64url(public), "auth": b64url(self.auth)},
        }


def verified_vapid(header: str, origin: str) -> str:
    """Check a ``vapid t=<jwt>,k=<key>`` header; the server's public key (``k``)."""
    scheme, _, rest = header.partition(" ")
    assert scheme == "vapid", header
    parts = dict(item.split("=", 1) for item in rest.split(","))
    token, key = parts["t"], parts["k"]
    head, claims_text, signature = token.split(".")
    assert json.loads(unb64url(head)) == {"typ": "JWT", "alg": "ES256"}
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(key))
    raw = unb64url(signature)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, f"{head}.{claims_text}".encode(), ec.ECDSA(hashes.SHA256()))  # raises
    claims = json.loads(unb64url(claims_text))
    assert claims["aud"] == origin, claims
    assert time.time() < claims["exp"] <= time.time() + 24 * 3600, claims
    assert claims["sub"].startswith(("mailto:", "https:")), claims
    return key


@dataclass
class PushService:
    port: int = 0
    browsers: dict[str, Browser] = field(default_factory=dict[str, Browser])
    received: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])  # decrypted
    server_keys: list[str] = field(default_factory=list[str])  # the VAPID k of each push
    status: int = 201
    errors: list[str] = field(default_factory=list[str])
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _runner: web.AppRunner | None = None

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def browser(self, name: str) -> Browser:
        self.browsers[name] = Browser(f"{self.origin}/push/{name}")
        return self.browsers[name]

    def answer(self, status: int) -> None:
        self.status = status

    async def wait_for(self, count: int, within: float = 15.0) -> list[dict[str, Any]]:
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.received) >= count or self.errors)
        assert not self.errors, self.errors
        return self.received

    async def _push(self, request: web.Request) -> web.Response:
        try:
            return await self._checked(request)
        except Exception as exc:  # what the sender got wrong, for the test to show
            async with self._changed:
                self.errors.append(repr(exc))
                self._changed.notify_all()
            return web.Response(status=400, text=repr(exc))

    async def _checked(self, request: web.Request) -> web.Response:
        browser = self.browsers[request.match_info["name"]]
        self.server_keys.append(verified_vapid(request.headers["Authorization"], self.origin))
        assert request.headers["Content-Encoding"] == "aes128gcm"
        assert int(request.headers["TTL"]) > 0
        body = await request.read()
        plain = http_ece.decrypt(
            body, private_key=browser.key, auth_secret=browser.auth, version="aes128gcm"
        )
        async with self._changed:
            self.received.append({"to": request.match_info["name"], **json.loads(plain)})
            self._changed.notify_all()
        return web.Response(status=self.status)

    async def __aenter__(self) -> PushService:
        app = web.Application()
        app.router.add_post("/push/{name}", self._push)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server  # pyright: ignore[reportPrivateUsage]
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

"""A stand-in for the WhatsApp Business Cloud API on 127.0.0.1, and a webhook driver that signs.

    async with WhatsAppAPI() as api:          # api.base_url -> platforms.whatsapp.base_url
        status, wamid = await api.user_says(webhook_url, "15550001111", "hi")
        await api.wait_until(lambda: api.texts_to("15550001111"))

The Graph API side, as Meta documents it:

- ``GET /v21.0/{phone_number_id}``: the number (the adapter's credential check);
- ``POST /v21.0/{phone_number_id}/messages`` with ``Authorization: Bearer <token>``:
  a text message (``type: text``, ``text.body`` of 1-4096 characters) answers
  ``{"messaging_product", "contacts": [{"input", "wa_id"}], "messages": [{"id": "wamid..."}]}``;
  a read receipt (``status: read``, ``message_id``; with ``typing_indicator`` the typing
  indicator) answers ``{"success": true}`` and is kept in ``reads``.
- ``GET /v21.0/{media-id}`` with the bearer token: a medium ``upload`` kept, as
  ``{"messaging_product", "url", "mime_type", "sha256", "file_size", "id"}``; the ``url`` is
  on the stand-in's own host (``/whatsapp_business/attachments/?mid=...``, as Meta's lookaside
  URLs are) and answers the bytes only with the same bearer token (401 without), each fetch
  kept in ``media_fetches`` as ``(media id, Authorization)``.
- errors are ``{"error": {"message", "type", "code", "error_data": {"messaging_product",
  "details"}, "fbtrace_id"}}``: 190 for a wrong token (401), 100 for a bad parameter (400),
  131056 when a message to the same user comes sooner than ``pair_every`` seconds after the
  last one accepted (the pair rate limit, counted on arrival, in ``pair_limited``), 131047 for a
  user in ``closed`` (outside the 24-hour window), and whatever ``script(code)`` queues.

The webhook side: ``deliver`` POSTs an event to Iris signed as Meta signs it
(``X-Hub-Signature-256: sha256=HMAC-SHA256(app_secret, body)``), or with the signature given
(a forgery, or none); ``user_says`` wraps a text message in a whole event and delivers it,
``user_sends`` a media message (``image``, ``audio``, ``document``, ...) of an uploaded medium.

Every Graph API request is kept in ``calls`` as ``ApiCall(t, path, body, status, code)``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiohttp import web

VERSION = "v21.0"

_DETAILS = {
    100: ("(#100) Invalid parameter", "Parameter value is not valid"),
    131000: ("Something went wrong", "Message failed to send because of an unknown error."),
    131047: (
        "Re-engagement message",
        "Message failed to send because more than 24 hours have passed since the customer "
        "last replied to this number.",
    ),
    131056: (
        "(Business Account, Consumer Account) pair rate limit hit",
        "Message failed to send because there were too many messages sent from this phone "
        "number to the same phone number in a short period of time.",
    ),
}


@dataclass(frozen=True)
class ApiCall:
    t: float
    path: str
    body: dict[str, Any]
    status: int
    code: int = 0  # the Graph API error code, 0 when it succeeded


@dataclass(frozen=True)
class Sent:
    t: float
    to: str
    text: str
    id: str
    quoted: str = ""  # the message it replies to (``context.message_id``)


@dataclass
class WhatsAppAPI:
    phone_number_id: str = "106540352242922"
    token: str = "EAAG-test-token"
    app_secret: str = "app-secret-for-tests"
    pair_every: float = 0.5
    calls: list[ApiCall] = field(default_factory=list[ApiCall])
    sent: list[Sent] = field(default_factory=list[Sent])
    reads: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    closed: set[str] = field(default_factory=set[str])
    pair_limited: int = 0
    media: dict[str, tuple[bytes, str]] = field(default_factory=dict[str, tuple[bytes, str]])
    media_fetches: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    media_host: str = "127.0.0.1"  # the host media URLs name (another: a foreign one)
    _scripted: list[int] = field(default_factory=list[int])
    _last: dict[str, float] = field(default_factory=dict[str, float])
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{VERSION}"

    async def __aenter__(self) -> WhatsAppAPI:
        app = web.Application()
        app.router.add_get(f"/{VERSION}/{{number}}", self._number)
        app.router.add_post(f"/{VERSION}/{{number}}/messages", self._messages)
        app.router.add_get("/whatsapp_business/attachments/", self._media_file)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server  # pyright: ignore[reportPrivateUsage]
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- what the test looks at -------------------------------------------------------------
    def script(self, code: int, times: int = 1) -> None:
        """Answer the next ``times`` text messages with error ``code``."""
        self._scripted.extend([code] * times)

    def texts_to(self, wa_id: str) -> list[str]:
        return [s.text for s in self.sent if s.to == wa_id]

    def errors(self, code: int) -> list[ApiCall]:
        return [c for c in self.calls if c.code == code]

    async def wait_until(self, done: Callable[[], object], within: float = 10.0) -> None:
        async with asyncio.timeout(within):
            while not done():
                self._changed.clear()
                await self._changed.wait()

    # -- the webhook driver -----------------------------------------------------------------
    def signature(self, body: bytes) -> str:
        return "sha256=" + hmac.new(self.app_secret.encode(), body, hashlib.sha256).hexdigest()

    async def deliver(
        self, url: str, event: dict[str, Any], *, signature: str | None = None, signed: bool = True
    ) -> int:
        """POST ``event`` to Iris's webhook as Meta does; the HTTP status Iris answered."""
        body = json.dumps(event).encode()
        headers = {"Content-Type": "application/json"}
        if signed:
            headers["X-Hub-Signature-256"] = signature or self.signature(body)
        async with httpx.AsyncClient() as client:
            answer = await client.post(url, content=body, headers=headers)
        return answer.status_code

    def event(self, sender: str, text: str, message_id: str, name: str = "Ada") -> dict[str, Any]:
        """A webhook event carrying one text message, as Meta sends it."""
        message = {"type": "text", "text": {"body": text}}
        return self.message_event(sender, message, message_id, name)

    def message_event(
        self, sender: str, message: dict[str, Any], message_id: str, name: str = "Ada"
    ) -> dict[str, Any]:
        """A webhook event carrying one message (its ``type`` and that type's object)."""
        value = {
            "messaging_product": "whatsapp",
            "metadata": {
                "display_phone_number": "15550783881",
                "phone_number_id": self.phone_number_id,
            },
            "contacts": [{"profile": {"name": name}, "wa_id": sender}],
            "messages": [
                {
                    "from": sender,
                    "id": message_id,
                    "timestamp": str(int(time.time())),
                    **message,
                }
            ],
        }
        change = {"value": value, "field": "messages"}
        return {
            "object": "whatsapp_business_account",
            "entry": [{"id": "WABA", "changes": [change]}],
        }

    async def user_says(
        self, url: str, sender: str, text: str, *, message_id: str | None = None
    ) -> tuple[int, str]:
        message_id = message_id or f"wamid.in.{next(self._ids)}"
        return await self.deliver(url, self.event(sender, text, message_id)), message_id

    def upload(self, data: bytes, mime: str) -> str:
        """A medium the Graph API serves (as a user's upload is); its media id."""
        media_id = f"{1_000_000_000_000 + next(self._ids)}"
        self.media[media_id] = (data, mime)
        return media_id

    async def user_sends(
        self,
        url: str,
        sender: str,
        kind: str,
        data: bytes,
        mime: str,
        *,
        caption: str | None = None,
        filename: str | None = None,
        voice: bool = False,
        media_id: str | None = None,
    ) -> tuple[int, str]:
        """A media message (``kind``: image, audio, document, video, sticker) of ``data``,
        delivered; ``media_id`` names one not uploaded (a medium Meta no longer has)."""
        medium: dict[str, Any] = {
            "mime_type": mime,
            "sha256": hashlib.sha256(data).hexdigest(),
            "id": media_id or self.upload(data, mime),
        }
        if caption is not None:
            medium["caption"] = caption
        if filename is not None:
            medium["filename"] = filename
        if voice:
            medium["voice"] = True
        message_id = f"wamid.in.{next(self._ids)}"
        event = self.message_event(sender, {"type": kind, kind: medium}, message_id)
        return await self.deliver(url, event), message_id

    # -- the Graph API ----------------------------------------------------------------------
    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {self.token}"

    async def _number(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _error(401, 190, "Invalid OAuth access token - Cannot parse access token")
        media_id = request.match_info["number"]
        if media_id in self.media:
            data, mime = self.media[media_id]
            url = f"http://{self.media_host}:{self.port}/whatsapp_business/attachments/?mid={media_id}"
            return web.json_response(
                {
                    "messaging_product": "whatsapp",
                    "url": url,
                    "mime_type": mime,
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "file_size": len(data),
                    "id": media_id,
                }
            )
        if media_id != self.phone_number_id:
            return _error(400, 100, "Unsupported get request.")
        return web.json_response({"id": self.phone_number_id})

    async def _media_file(self, request: web.Request) -> web.Response:
        media_id = request.query.get("mid", "")
        self.media_fetches.append((media_id, request.headers.get("Authorization", "")))
        self._changed.set()
        if not self._authorized(request):
            return web.Response(status=401)
        if media_id not in self.media:
            return web.Response(status=404)
        data, mime = self.media[media_id]
        return web.Response(body=data, content_type=mime)

    async def _messages(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        now = asyncio.get_running_loop().time()
        answer = self._answer(request, body, now)
        code = 0
        if answer.status != 200:
            code = json.loads(answer.text or "{}")["error"]["code"]
        self.calls.append(ApiCall(now, request.path, body, answer.status, code))
        self._changed.set()
        return answer

    def _answer(self, request: web.Request, body: dict[str, Any], now: float) -> web.Response:
        if not self._authorized(request):
            return _error(401, 190, "Invalid OAuth access token - Cannot parse access token")
        if request.match_info["number"] != self.phone_number_id:
            return _error(400, 100, "Unsupported post request.")
        if body.get("messaging_product") != "whatsapp":
            return _error(400, 100, "(#100) The parameter messaging_product is required.")
        if body.get("status") == "read":
            if not str(body.get("message_id", "")).startswith("wamid."):
                return _error(400, 100, "(#100) Invalid parameter")
            self.reads.append(body)
            return web.json_response({"success": True})
        to = str(body.get("to", ""))
        text = str(body.get("text", {}).get("body", ""))
        if body.get("type") != "text" or not to or not 1 <= len(text) <= 4096:
            return _error(400, 100, "(#100) Invalid parameter")
        if self._scripted:
            return _error(400, self._scripted.pop(0))
        if to in self.closed:
            return _error(400, 131047)
        if now - self._last.get(to, float("-inf")) < self.pair_every:
            self.pair_limited += 1
            return _error(400, 131056)
        self._last[to] = now
        wamid = f"wamid.out.{next(self._ids)}"
        quoted = str(body.get("context", {}).get("message_id", ""))
        self.sent.append(Sent(now, to, text, wamid, quoted))
        return web.json_response(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": to}],
                "messages": [{"id": wamid}],
            }
        )


def _error(status: int, code: int, message: str | None = None) -> web.Response:
    title, details = _DETAILS.get(code, ("Error", ""))
    error: dict[str, Any] = {
        "message": message or f"(#{code}) {title}",
        "type": "OAuthException",
        "code": code,
        "fbtrace_id": "AbCdEfGhIjK",
    }
    if details:
        error["error_data"] = {"messaging_product": "whatsapp", "details": details}
    return web.json_response({"error": error}, status=status)

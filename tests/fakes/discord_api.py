"""A fake Discord REST API on 127.0.0.1: the endpoints the Discord adapter uses, on the wire.

It keeps each message's current content (what a user would see), records every call, enforces
Discord's per-channel budget of 5 requests per 5 s with its X-RateLimit headers and the global
limit of 50 requests a second for the whole bot (every request; a 429 with ``global: true``),
counting on arrival (``limited`` counts the 429s of both), and lets a test script the next
answers (a 429, a 500, a hang). ``attachment(...)`` puts a file on its CDN route
(``/attachments/{channel}/{id}/{filename}``, signed query, no token, as Discord's) and returns
the attachment object a MESSAGE_CREATE carries. The gateway is ``discord_gateway``.

Message components: a message keeps its ``components`` (action rows of buttons; an edit with
``components: []`` takes them away, one without leaves them). ``interaction(...)`` makes the
INTERACTION_CREATE payload of a button press (refused with ValueError when the message shows
no such button) for the gateway to dispatch; its answer comes to the interaction callback
endpoint ``POST /interactions/{id}/{token}/callback`` (no bot token needed, as on Discord):
kept in ``responses`` by interaction id, a second one refused with 400 code 40060
("Interaction has already been acknowledged"), an unknown id or token with 404 10062::

    async with DiscordAPI() as api:
        platform = DiscordPlatform(DiscordConfig(token=api.token, base_url=api.base_url))
        ...
        api.script(Scripted(429, retry_after=0.25))
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

BOT_ID = "4000000000000001"
OWNER_ID = "4000000000000002"
API_PREFIX = "/api/v10"


@dataclass
class Call:
    method: str
    path: str
    channel_id: str
    json: dict[str, Any]
    authorization: str
    status: int = 0
    message_id: str = ""
    at: float = field(default_factory=time.monotonic)
    answer_with: int = 0  # a scripted status sent after the request took effect
    connection: int = 0  # the client's port: calls on one kept-alive connection share it


@dataclass
class Scripted:
    """The answer to the next channel request instead of the normal one."""

    status: int
    retry_after: float = 0.0
    hang: bool = False  # never answer (until the server stops)
    deliver: bool = False  # perform the request, then answer ``status`` (a 500 that landed)
    method: str = ""  # only a request with this HTTP method (any when empty)
    everywhere: bool = False  # a 429 of the global limit (every route), not of one bucket


@dataclass
class Message:
    id: str
    channel_id: str
    content: str
    edits: int = 0
    components: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])

    def buttons(self) -> list[dict[str, Any]]:
        return [c for row in self.components for c in row.get("components", [])]


@dataclass
class Interaction:
    id: str
    token: str
    message_id: str
    user_id: str
    custom_id: str


class DiscordAPI:
    def __init__(
        self,
        *,
        token: str = "test-bot-token",
        rate: tuple[int, float] = (5, 5.0),
        global_rate: tuple[int, float] = (50, 1.0),
    ):
        self.token = token
        self.rate_limit, self.rate_window = rate
        self.global_rate = global_rate
        self.limited = 0  # 429s answered for going over a limit (not the scripted ones)
        self._global: list[float] = []
        self.calls: list[Call] = []
        self.messages: dict[str, Message] = {}
        self._scripted: list[Scripted] = []
        self._windows: dict[str, list[float]] = {}
        self._ids = itertools.count(1_000_000_000_000_000_001)
        self._changed = asyncio.Condition()
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.base_url = ""
        self.files: dict[str, bytes] = {}  # CDN path -> bytes
        self.cdn_requests: list[tuple[str, dict[str, str]]] = []  # (path, headers) per fetch
        self.interactions: dict[str, Interaction] = {}
        # interaction id -> the body of its callback ({"type", "data"}).
        self.responses: dict[str, dict[str, Any]] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> DiscordAPI:
        app = web.Application(middlewares=[self._authorized])
        app.router.add_get(API_PREFIX + "/users/@me", self._me)
        app.router.add_get(API_PREFIX + "/oauth2/applications/@me", self._application)
        app.router.add_post(API_PREFIX + "/channels/{channel}/messages", self._create)
        app.router.add_patch(API_PREFIX + "/channels/{channel}/messages/{message}", self._edit)
        app.router.add_delete(API_PREFIX + "/channels/{channel}/messages/{message}", self._delete)
        app.router.add_post(API_PREFIX + "/channels/{channel}/typing", self._typing)
        app.router.add_get("/attachments/{channel}/{id}/{filename}", self._cdn)
        app.router.add_post(
            API_PREFIX + "/interactions/{interaction}/{token}/callback", self._callback
        )
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}{API_PREFIX}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- what tests use ----------------------------------------------------------------------

    def script(self, *answers: Scripted) -> None:
        self._scripted.extend(answers)

    def channel_calls(self) -> list[Call]:
        """Calls to /channels/..., the ones a chat user would notice."""
        return [c for c in self.calls if c.channel_id]

    async def wait_until(self, ready: Callable[[], bool]) -> None:
        """Wait until ``ready()`` holds, checked after every recorded call."""
        async with self._changed:
            await self._changed.wait_for(ready)

    def attachment(
        self, channel: str, filename: str, content_type: str, data: bytes, *, voice: bool = False
    ) -> dict[str, Any]:
        """An attachment object as a MESSAGE_CREATE carries it, its bytes served at its
        ``url`` as Discord's CDN serves them (``cdn_requests`` records each fetch)."""
        file_id = str(next(self._ids))
        path = f"/attachments/{channel}/{file_id}/{filename}"
        self.files[path] = data
        origin = self.base_url.removesuffix(API_PREFIX)
        url = f"{origin}{path}?ex=6760a2f1&is=675f5171&hm=signed"
        payload: dict[str, Any] = {
            "id": file_id,
            "filename": filename,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": content_type,
        }
        if voice:
            payload.update(duration_secs=3.0, waveform="AAAA", flags=0)
        return payload

    async def _cdn(self, request: web.Request) -> web.StreamResponse:
        self.cdn_requests.append((request.path, dict(request.headers)))
        data = self.files.get(request.path)
        if data is None:
            return web.Response(status=404, text="Not Found")
        return web.Response(body=data, content_type="application/octet-stream")

    @web.middleware
    async def _authorized(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if (retry_after := self._over_global()) is not None:
            self.limited += 1
            headers = {
                "X-RateLimit-Global": "true",
                "X-RateLimit-Scope": "global",
                "Retry-After": str(max(1, round(retry_after))),
                "Via": "1.1 google",
            }
            body = {
                "message": "You are being rate limited.",
                "retry_after": retry_after,
                "global": True,
            }
            response = _json(body, status=429, headers=headers)
            if channel := request.match_info.get("channel", ""):
                call = Call(request.method, request.path.removeprefix(API_PREFIX), channel, {}, "")
                return await self._finish(call, response)
            return response
        # The CDN takes no token (its URLs are signed); channel calls check the token
        # themselves, so that a refused one is recorded too; an interaction's callback is
        # authorized by its token, not the bot's.
        if (
            request.path.startswith("/attachments/")
            or "/channels/" in request.path
            or "/interactions/" in request.path
        ):
            return await handler(request)
        if request.headers.get("Authorization") != f"Bot {self.token}":
            return _unauthorized()
        return await handler(request)

    # -- handlers ----------------------------------------------------------------------------

    async def _me(self, request: web.Request) -> web.Response:
        return _json(user_payload(BOT_ID, "iris-bot", bot=True))

    async def _application(self, request: web.Request) -> web.Response:
        return _json(
            {
                "id": BOT_ID,
                "name": "Iris",
                "icon": None,
                "description": "",
                "bot_public": False,
                "bot_require_code_grant": False,
                "owner": user_payload(OWNER_ID, "owner"),
                "verify_key": "0" * 64,
                "flags": 0,
            }
        )

    async def _create(self, request: web.Request) -> web.StreamResponse:
        channel = request.match_info["channel"]
        call, early = await self._begin(request, channel)
        if early is not None:
            return early
        content = call.json.get("content") or ""
        if (invalid := _invalid_content(content)) is not None:
            return await self._finish(call, invalid)
        message = Message(id=str(next(self._ids)), channel_id=channel, content=content)
        if (components := call.json.get("components")) is not None:
            if (invalid := _invalid_components(components)) is not None:
                return await self._finish(call, invalid)
            message.components = components
        self.messages[message.id] = message
        call.message_id = message.id
        return await self._finish(call, self._message_response(message, channel))

    async def _edit(self, request: web.Request) -> web.StreamResponse:
        channel = request.match_info["channel"]
        call, early = await self._begin(request, channel)
        if early is not None:
            return early
        call.message_id = request.match_info["message"]
        message = self.messages.get(call.message_id)
        if message is None or message.channel_id != channel:
            body = {"message": "Unknown Message", "code": 10008}
            return await self._finish(call, _json(body, status=404))
        content = call.json.get("content") or ""
        if (invalid := _invalid_content(content)) is not None:
            return await self._finish(call, invalid)
        components = call.json.get("components")
        if components is not None and (invalid := _invalid_components(components)) is not None:
            return await self._finish(call, invalid)
        # Discord accepts an edit to identical content; it is not an error there.
        message.content = content
        if components is not None:
            message.components = components
        message.edits += 1
        return await self._finish(call, self._message_response(message, channel))

    async def _delete(self, request: web.Request) -> web.StreamResponse:
        channel = request.match_info["channel"]
        call, early = await self._begin(request, channel)
        if early is not None:
            return early
        call.message_id = request.match_info["message"]
        message = self.messages.get(call.message_id)
        if message is None or message.channel_id != channel:
            body = {"message": "Unknown Message", "code": 10008}
            return await self._finish(call, _json(body, status=404))
        del self.messages[call.message_id]
        return await self._finish(
            call, web.Response(status=204, headers=self._rate_headers(channel))
        )

    async def _typing(self, request: web.Request) -> web.StreamResponse:
        channel = request.match_info["channel"]
        call, early = await self._begin(request, channel)
        if early is not None:
            return early
        return await self._finish(
            call, web.Response(status=204, headers=self._rate_headers(channel))
        )

    def interaction(
        self,
        message_id: str,
        custom_id: str,
        user: dict[str, Any],
        *,
        guild_id: str | None,
        stale: bool = False,
    ) -> dict[str, Any]:
        """The INTERACTION_CREATE payload of ``user`` pressing a button of a message
        (``stale``: a press sent before the button went; no check that it is shown)."""
        message = self.messages[message_id]
        if not stale and not any(b.get("custom_id") == custom_id for b in message.buttons()):
            raise ValueError(f"message {message_id} shows no button {custom_id!r}")
        interaction = Interaction(
            id=str(next(self._ids)),
            token=f"itoken-{len(self.interactions) + 1}",
            message_id=message_id,
            user_id=str(user["id"]),
            custom_id=custom_id,
        )
        self.interactions[interaction.id] = interaction
        payload: dict[str, Any] = {
            "id": interaction.id,
            "application_id": BOT_ID,
            "type": 3,  # MESSAGE_COMPONENT
            "data": {"custom_id": custom_id, "component_type": 2},
            "channel_id": message.channel_id,
            "channel": {"id": message.channel_id, "type": 0 if guild_id else 1},
            "token": interaction.token,
            "version": 1,
            "message": {
                **message_payload(
                    message.id,
                    message.channel_id,
                    message.content,
                    user_payload(BOT_ID, "iris-bot", bot=True),
                    guild_id=guild_id,
                ),
                "components": message.components,
            },
            "app_permissions": "0",
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": guild_id or user["id"]},
            "context": 0 if guild_id else 1,
            "attachment_size_limit": 8_388_608,
        }
        if guild_id is not None:
            payload["guild_id"] = guild_id
            payload["guild_locale"] = "en-US"
            payload["member"] = {
                "user": user,
                "roles": [],
                "joined_at": "2026-11-01T00:00:00.000000+00:00",
                "deaf": False,
                "mute": False,
                "flags": 0,
                "permissions": "0",
            }
        else:
            payload["user"] = user
        return payload

    async def _callback(self, request: web.Request) -> web.Response:
        interaction = self.interactions.get(request.match_info["interaction"])
        raw = await request.read()
        body: dict[str, Any] = json.loads(raw) if raw else {}
        if interaction is None or interaction.token != request.match_info["token"]:
            return _json({"message": "Unknown interaction", "code": 10062}, status=404)
        if interaction.id in self.responses:
            answer = {"message": "Interaction has already been acknowledged.", "code": 40060}
            return _json(answer, status=400)
        kind = body.get("type")
        if kind not in (4, 5, 6, 7):
            return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
        async with self._changed:
            self.responses[interaction.id] = body
            self._changed.notify_all()
        message = self.messages[interaction.message_id]
        data: dict[str, Any] = body.get("data") or {}
        if kind == 7:  # UPDATE_MESSAGE: the press edits the message it was on
            message.content = data.get("content", message.content)
            message.components = data.get("components", message.components)
        reply: dict[str, Any] = {
            "interaction": {
                "id": interaction.id,
                "type": 3,
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(int(data.get("flags") or 0) & 64),
            },
            "resource": {"type": kind},
        }
        return _json(reply)

    # -- the machinery -----------------------------------------------------------------------

    async def _begin(
        self, request: web.Request, channel: str
    ) -> tuple[Call, web.StreamResponse | None]:
        raw = await request.read()
        call = Call(
            method=request.method,
            path=request.path.removeprefix(API_PREFIX),
            channel_id=channel,
            json=json.loads(raw) if raw else {},
            authorization=request.headers.get("Authorization", ""),
        )
        peer = request.transport.get_extra_info("peername") if request.transport else None
        call.connection = peer[1] if peer else 0
        if call.authorization != f"Bot {self.token}":
            return call, await self._finish(call, _unauthorized())
        if scripted := self._next_scripted(call.method):
            if scripted.hang:
                await self._record(call)
                await self._release.wait()
                return call, web.Response(status=504)
            if scripted.deliver:
                call.answer_with = scripted.status
                return call, None
            return call, await self._finish(call, self._scripted_response(scripted, channel))
        # Typing has a bucket of its own on Discord; messages share the channel's.
        if not call.path.endswith("/typing") and (limited := self._take_budget(channel)):
            return call, await self._finish(call, limited)
        return call, None

    def _next_scripted(self, method: str) -> Scripted | None:
        for index, scripted in enumerate(self._scripted):
            if scripted.method in ("", method):
                return self._scripted.pop(index)
        return None

    async def _finish(self, call: Call, response: web.StreamResponse) -> web.StreamResponse:
        if call.answer_with:
            body = {"message": f"{call.answer_with}: Internal Server Error", "code": 0}
            response = _json(body, status=call.answer_with)
        call.status = response.status
        await self._record(call)
        return response

    async def _record(self, call: Call) -> None:
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    def _over_global(self) -> float | None:
        """Count a request against the bot's global limit; the seconds to wait when over it."""
        calls, window = self.global_rate
        now = time.monotonic()
        self._global = [t for t in self._global if now - t < window]
        if len(self._global) >= calls:
            return round(window - (now - self._global[0]), 3)
        self._global.append(now)
        return None

    def _take_budget(self, channel: str) -> web.Response | None:
        now = time.monotonic()
        window = [t for t in self._windows.get(channel, []) if now - t < self.rate_window]
        self._windows[channel] = window
        if len(window) >= self.rate_limit:
            retry_after = round(self.rate_window - (now - window[0]), 3)
            self.limited += 1
            return self._scripted_response(Scripted(429, retry_after=retry_after), channel)
        window.append(now)
        return None

    def _rate_headers(self, channel: str) -> dict[str, str]:
        now = time.monotonic()
        window = self._windows.get(channel, [])
        reset_after = self.rate_window - (now - window[0]) if window else self.rate_window
        return {
            "X-RateLimit-Bucket": f"bucket-{channel}",
            "X-RateLimit-Limit": str(self.rate_limit),
            "X-RateLimit-Remaining": str(max(0, self.rate_limit - len(window))),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
        }

    def _scripted_response(self, scripted: Scripted, channel: str) -> web.Response:
        if scripted.status == 429:
            headers = {
                **self._rate_headers(channel),
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset-After": f"{scripted.retry_after:.3f}",
                "X-RateLimit-Scope": "user",
                "Retry-After": str(max(1, round(scripted.retry_after))),
                "Via": "1.1 google",  # a 429 without it comes from Cloudflare, not the API
            }
            if scripted.everywhere:
                headers["X-RateLimit-Global"] = "true"
                headers["X-RateLimit-Scope"] = "global"
            body = {
                "message": "You are being rate limited.",
                "retry_after": scripted.retry_after,
                "global": scripted.everywhere,
            }
            return _json(body, status=429, headers=headers)
        return _json({"message": f"{scripted.status} error", "code": 0}, status=scripted.status)

    def _message_response(self, message: Message, channel: str) -> web.Response:
        payload = message_payload(
            message.id,
            message.channel_id,
            message.content,
            user_payload(BOT_ID, "iris-bot", bot=True),
            edited=bool(message.edits),
        )
        return _json(payload, headers=self._rate_headers(channel))


def _unauthorized() -> web.Response:
    return _json({"message": "401: Unauthorized", "code": 0}, status=401)


def _invalid_content(content: str) -> web.Response | None:
    if not content:
        return _json({"message": "Cannot send an empty message", "code": 50006}, status=400)
    if len(content) > 2000:
        too_long = {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}
        body = {
            "message": "Invalid Form Body",
            "code": 50035,
            "errors": {"content": {"_errors": [too_long]}},
        }
        return _json(body, status=400)
    return None


def _invalid_components(components: Any) -> web.Response | None:
    """Discord's answer to components it would refuse (None: taken)."""
    rows: list[Any] = components if isinstance(components, list) else [None]
    ok = len(rows) <= 5
    for row in rows:
        items: Any = row.get("components") if isinstance(row, dict) else None
        if not isinstance(items, list) or row.get("type") != 1 or not 1 <= len(items) <= 5:
            ok = False
            continue
        for item in items:
            custom_id = str(item.get("custom_id") or "") if isinstance(item, dict) else ""
            if item.get("type") != 2 or not 1 <= len(custom_id) <= 100 or not item.get("label"):
                ok = False
    if ok:
        return None
    return _json({"message": "Invalid Form Body", "code": 50035}, status=400)


def message_payload(
    message_id: str,
    channel_id: str,
    content: str,
    author: dict[str, Any],
    *,
    guild_id: str | None = None,
    edited: bool = False,
) -> dict[str, Any]:
    """A message object as Discord sends it (REST answers and MESSAGE_CREATE)."""
    payload: dict[str, Any] = {
        "id": message_id,
        "channel_id": channel_id,
        "type": 0,
        "content": content,
        "author": author,
        "timestamp": "2026-11-29T22:00:00.000000+00:00",
        "edited_timestamp": "2026-11-29T22:00:01.000000+00:00" if edited else None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": False,
        "flags": 0,
    }
    if guild_id is not None:
        payload["guild_id"] = guild_id
    return payload


def user_payload(
    user_id: str, name: str, *, bot: bool = False, global_name: str | None = None
) -> dict[str, Any]:
    return {
        "id": user_id,
        "username": name,
        "discriminator": "0",
        "global_name": global_name,
        "avatar": None,
        "bot": bot,
        "flags": 0,
    }


def _json(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # Exactly ``application/json``, as Discord sends it: discord.py compares the header verbatim.
    return web.Response(
        body=json.dumps(body).encode(),
        status=status,
        headers={**(headers or {}), "Content-Type": "application/json"},
    )

"""Discord's REST API as the adapter uses it: one request per call, rate limits read, never slept on.

Iris's own aiohttp client against ``platforms.discord.base_url`` (API v10): create, edit and
delete a message, trigger typing, and ``GET /users/@me`` to check the token. A 429, or a call
to a bucket the last answer's ``X-RateLimit-*`` headers said is dry, raises
``PlatformRateLimited(retry_after)`` at once: the consumer's throttle (``throttle.py``) owns
waiting. A dry bucket is also reported (``on_dry``) so that the adapter's shared budget holds
that channel's chat until it refills, instead of the chat calling into it. A 5xx is never retried (a retried ``POST`` could post the reply twice).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from iris import __version__
from iris.surfaces.chat.downloads import read_capped
from iris.surfaces.chat.platforms.base import PlatformError, PlatformRateLimited, aiohttp_failures

# A reply must never ping @everyone, a role or a user: nothing in the text is parsed as a mention.
NO_MENTIONS: dict[str, Any] = {"parse": []}

_MESSAGE = "/channels/{c}/messages/{m}"


@dataclass
class RateLimits:
    """What Discord's rate-limit answers said: which buckets are dry and until when. Pure.

    Discord names a route's bucket in ``X-RateLimit-Bucket``; a bucket is per top-level
    resource (here the channel), so the key is (bucket, channel). Until a route's bucket is
    known, the route itself stands for it."""

    buckets: dict[str, str] = field(default_factory=dict[str, str])  # route -> bucket
    dry_until: dict[tuple[str, str], float] = field(default_factory=dict[tuple[str, str], float])
    global_until: float = float("-inf")

    def wait(self, route: str, channel: str, now: float) -> float:
        """Seconds until a call on ``route`` to ``channel`` may go out (0: now)."""
        until = max(self.global_until, self.dry_until.get(self.key(route, channel), now))
        return max(0.0, until - now)

    def answered(
        self, route: str, channel: str, headers: Mapping[str, str], sent_at: float
    ) -> None:
        """Learn from an answer's headers; ``sent_at`` is when the request went out.

        Counting the reset from the send (not the answer) errs towards calling a hair early:
        at worst Discord answers 429, which ``limited`` then records."""
        if bucket := headers.get("X-RateLimit-Bucket"):
            self.buckets[route] = bucket
        key = self.key(route, channel)
        remaining = _number(headers.get("X-RateLimit-Remaining"))
        reset_after = _number(headers.get("X-RateLimit-Reset-After"))
        if remaining == 0 and reset_after is not None:
            self.dry_until[key] = sent_at + reset_after
        else:
            self.dry_until.pop(key, None)

    def limited(
        self, route: str, channel: str, retry_after: float, *, everywhere: bool, now: float
    ) -> None:
        """A 429: no call on this bucket (on any, when ``everywhere``) for ``retry_after`` s."""
        if everywhere:
            self.global_until = max(self.global_until, now + retry_after)
        else:
            self.dry_until[self.key(route, channel)] = now + retry_after

    def key(self, route: str, channel: str) -> tuple[str, str]:
        """The bucket a call on ``route`` to ``channel`` counts against."""
        return self.buckets.get(route, route), channel


class DiscordREST:
    """An open session to Discord's REST API for one bot token."""

    def __init__(
        self,
        *,
        token: str,
        base_url: str,
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
        on_global: Callable[[float], None] | None = None,
        on_dry: Callable[[str, float], None] | None = None,
    ) -> None:
        self._on_global = on_global  # told ``retry_after`` of a global 429
        self._on_dry = on_dry  # told (channel, seconds) when a channel's bucket ran dry
        self._headers = {
            "Authorization": f"Bot {token}",
            # Discord asks for ``DiscordBot (url, version)``; Cloudflare may block other agents.
            "User-Agent": f"DiscordBot (iris-gateway, {__version__})",
        }
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None
        self.limits = RateLimits()

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def me(self) -> dict[str, Any]:
        """The bot's own user: also the check that the token is accepted."""
        try:
            return await self._call("GET", "/users/@me")
        except DiscordRefused as exc:
            if exc.status == 401:
                raise PlatformError("discord: login failed: the bot token was refused") from None
            raise

    async def create_message(
        self, channel: str, content: str, *, components: list[dict[str, Any]] | None = None
    ) -> str:
        body: dict[str, Any] = {"content": content, "allowed_mentions": NO_MENTIONS}
        if components is not None:
            body["components"] = components
        message = await self._call("POST", "/channels/{c}/messages", channel, body=body)
        if "id" not in message:
            # A 2xx that is not a message (a proxy's page?): it may have been posted.
            raise PlatformError(
                "discord: the answer to a send has no message id", maybe_landed=True
            )
        return str(message["id"])

    async def edit_message(
        self,
        channel: str,
        message_id: str,
        content: str,
        *,
        components: list[dict[str, Any]] | None = None,
    ) -> None:
        body: dict[str, Any] = {"content": content, "allowed_mentions": NO_MENTIONS}
        if components is not None:  # [] takes a message's buttons away
            body["components"] = components
        await self._call("PATCH", _MESSAGE, channel, message_id, body=body)

    async def delete_message(self, channel: str, message_id: str) -> None:
        await self._call("DELETE", _MESSAGE, channel, message_id)

    async def trigger_typing(self, channel: str) -> None:
        # Discord shows it for ~10 s or until the bot's next message.
        await self._call("POST", "/channels/{c}/typing", channel)

    async def download(self, url: str, max_bytes: int) -> bytes:
        """An attachment from Discord's CDN: a signed URL, fetched without the bot token (it
        is no API call), read no further than ``max_bytes``."""
        headers = {"User-Agent": self._headers["User-Agent"]}
        with aiohttp_failures("discord"):
            async with self._open().get(url, headers=headers) as response:
                if response.status != 200:
                    raise PlatformError(f"discord: the attachment answered {response.status}")
                if (response.content_length or 0) > max_bytes:
                    raise PlatformError(f"larger than {max_bytes} bytes")
                return await read_capped(
                    response.content.iter_chunked(1 << 16), max_bytes, "discord"
                )

    async def _call(
        self,
        method: str,
        endpoint: str,
        channel: str = "",
        message_id: str = "",
        *,
        body: dict[str, Any] | None = None,
    ) -> Any:
        """One request to ``endpoint`` (``{c}`` the channel, ``{m}`` the message)."""
        # The route names the endpoint, not the message: every edit in a channel shares a bucket.
        route = f"{method} {endpoint}"
        path = endpoint.format(c=channel, m=message_id)
        now = self._clock()
        if (wait := self.limits.wait(route, channel, now)) > 0:
            raise PlatformRateLimited(wait, "discord: rate limit bucket is dry", scope="local")
        with aiohttp_failures("discord"):
            async with asyncio.timeout(self._timeout):
                async with self._open().request(
                    method, self._base_url + path, json=body, headers=self._headers
                ) as response:
                    raw = await response.read()
        self.limits.answered(route, channel, response.headers, now)
        answer = _json(raw)
        if response.status == 429:
            retry_after = _retry_after(answer, response.headers)
            everywhere = answer.get("global") is True or "X-RateLimit-Global" in response.headers
            self.limits.limited(route, channel, retry_after, everywhere=everywhere, now=now)
            if everywhere and self._on_global is not None:
                self._on_global(retry_after)
            self._report_dry(route, channel)
            raise PlatformRateLimited(retry_after, scope="bot" if everywhere else "chat")
        self._report_dry(route, channel)
        if response.status >= 500:
            # The platform received the request; whether it posted the message is unknown.
            raise PlatformError(f"discord: server error {response.status}", maybe_landed=True)
        if response.status >= 400:
            raise DiscordRefused(response.status, answer)
        return answer

    def _report_dry(self, route: str, channel: str) -> None:
        """Tell ``on_dry`` how long the channel's bucket for ``route`` stays dry, if it is."""
        if not channel or self._on_dry is None:
            return
        until = self.limits.dry_until.get(self.limits.key(route, channel))
        if until is not None and (wait := until - self._clock()) > 0:
            self._on_dry(channel, wait)

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            # One kept-alive connection pool for every call of this bot.
            self._session = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())
        return self._session


class DiscordRefused(PlatformError):
    """Discord answered 4xx (other than 429): the request did not take effect."""

    def __init__(self, status: int, answer: Mapping[str, Any]) -> None:
        message = answer.get("message") or "refused"
        super().__init__(f"discord: {status} {message} (code {answer.get('code', 0)})")
        self.status = status


def _json(raw: bytes) -> dict[str, Any]:
    try:
        answer = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return answer if isinstance(answer, dict) else {}


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _retry_after(answer: Mapping[str, Any], headers: Mapping[str, str]) -> float:
    # The body's ``retry_after`` has millisecond precision; ``Retry-After`` is whole seconds.
    for value in (
        answer.get("retry_after"),
        headers.get("X-RateLimit-Reset-After"),
        headers.get("Retry-After"),
    ):
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except (TypeError, ValueError):
            continue
    return 1.0

"""The Discord adapter: sends, edits and typing through discord.py's client; receives its events.

A Discord thread is a channel of its own: a message in a thread arrives with ``chat_id`` = the
parent channel and ``thread = {"thread_id": <thread channel id>}``, and every send, edit and
typing call of the reply goes to the thread channel.

discord.py waits on its own: it sleeps through a 429 and retries, sleeps ahead of time when a
rate-limit bucket runs dry, and retries 5xx answers up to five times. The consumer's throttle
owns pacing, and a retried ``POST`` whose first answer was a 500 can post the reply twice, so
this adapter turns all three off (see ``_DirectHTTPClient``): one call, one request.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import re
from collections.abc import Awaitable, Generator, Mapping
from types import SimpleNamespace
from typing import Any, TypeVar

import aiohttp
import discord
from discord.http import HTTPClient, Ratelimit, Route

from iris.config import DiscordPlatform as DiscordConfig
from iris.surfaces.chat.platform import (
    Capabilities,
    IncomingMessage,
    OnMessage,
    PlatformError,
    PlatformRateLimited,
    RateBudget,
    aiohttp_failures,
)

log = logging.getLogger(__name__)

THREAD_KEY = "thread_id"

_T = TypeVar("_T")

# Set while this adapter's own send/edit/typing request runs: only those answers are turned
# into platform errors at once; login and the gateway keep discord.py's own handling.
_DIRECT: contextvars.ContextVar[bool] = contextvars.ContextVar("iris_discord_direct", default=False)


class DiscordPlatform:
    """``ChatPlatform`` for Discord, built from ``config.platforms.discord``."""

    name = "discord"
    capabilities = Capabilities(
        can_edit=True,
        max_length=2000,
        length_unit="chars",
        rate=RateBudget(capacity=5, per_seconds=5.0),
    )

    def __init__(self, config: DiscordConfig, *, request_timeout: float = 10.0) -> None:
        self._config = config
        self._timeout = request_timeout
        self._client: _IrisClient | None = None
        self._gateway: asyncio.Task[None] | None = None

    async def connect(self, on_message: OnMessage) -> None:
        """Log in over REST, then open the gateway; returns once the session is up (READY).

        Messages flow from READY on; discord.py's own ``ready`` waits seconds longer for every
        guild to stream in, which receiving does not need."""
        client = await self.login()
        client.hand_off = on_message
        if self._gateway is not None and not self._gateway.done():
            return  # already receiving: only the hand-off changes
        connected = asyncio.ensure_future(client.wait_for("connect"))
        gateway = asyncio.create_task(client.connect(reconnect=True), name="discord-gateway")
        self._gateway = gateway
        await asyncio.wait({gateway, connected}, return_when=asyncio.FIRST_COMPLETED)
        if connected.done():
            gateway.add_done_callback(_report_gateway_end)
            return
        connected.cancel()
        await self.disconnect()
        raise _gateway_error(None if gateway.cancelled() else gateway.exception())

    async def login(self) -> _IrisClient:
        """Log in over REST only: enough to send, edit and type."""
        if self._client is not None:
            return self._client
        if not self._config.token:
            raise PlatformError("discord: platforms.discord.token is not set")
        client = _IrisClient(base_url=self._config.base_url)
        try:
            await self._bounded(client.login(self._config.token))
        except discord.LoginFailure:
            await client.close()
            raise PlatformError("discord: login failed: the bot token was refused") from None
        except BaseException:
            await client.close()
            raise
        self._client = client
        return client

    async def disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()
        gateway, self._gateway = self._gateway, None
        if gateway is not None:
            gateway.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await gateway

    async def send(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        channel = self._channel(chat_id, thread)
        with self._direct():
            message = await self._bounded(channel.send(text))
        return str(message.id)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        message = self._channel(chat_id, thread).get_partial_message(int(message_id))
        with self._direct():
            await self._bounded(message.edit(content=text))

    async def send_typing(self, chat_id: str, *, thread: Mapping[str, str] | None = None) -> None:
        # One POST .../typing; Discord shows it for ~10 s or until the bot's next message.
        channel = self._channel(chat_id, thread)
        with self._direct():
            await self._bounded(_trigger_typing(channel))

    # -- internals --------------------------------------------------------------------------

    def _channel(
        self, chat_id: str, thread: Mapping[str, str] | None
    ) -> discord.PartialMessageable:
        if self._client is None:
            raise PlatformError("discord: not logged in (call connect first)")
        target = (thread or {}).get(THREAD_KEY) or chat_id
        return self._client.get_partial_messageable(int(target))

    @contextlib.contextmanager
    def _direct(self) -> Generator[None]:
        token = _DIRECT.set(True)
        try:
            yield
        finally:
            _DIRECT.reset(token)

    async def _bounded(self, call: Awaitable[_T]) -> _T:
        try:
            with aiohttp_failures("discord"):
                async with asyncio.timeout(self._timeout):
                    return await call
        except discord.HTTPException as exc:
            raise PlatformError(f"discord: {exc.status} {exc.text or exc}") from None


def _gateway_error(exc: BaseException | None) -> PlatformError:
    """Why the gateway ended before READY, in words an operator can act on."""
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return PlatformError(
            "discord: the gateway refused the Message Content intent; enable it for the bot"
            " in the developer portal"
        )
    if isinstance(exc, discord.ConnectionClosed):
        return PlatformError(f"discord: the gateway closed ({exc.code}): {exc.reason}")
    return PlatformError(f"discord: the gateway closed before the session started: {exc}")


def _report_gateway_end(gateway: asyncio.Task[None]) -> None:
    # discord.py reconnects by itself; an end it did not recover from means no more messages.
    if not gateway.cancelled() and (exc := gateway.exception()) is not None:
        log.error("discord: the gateway stopped, no more messages arrive: %s", _gateway_error(exc))


async def _trigger_typing(channel: discord.PartialMessageable) -> None:
    await channel.typing()


def incoming_message(message: discord.Message, *, bot_id: int | None = None) -> IncomingMessage:
    """Plain data for the runner from a discord.py message (``user_id`` for allowed_users).

    A mention of the bot (``<@id>``, ``<@!id>``) is addressing, not content: it is dropped."""
    channel = message.channel
    thread: dict[str, str] = {}
    chat_id = str(channel.id)
    if isinstance(channel, discord.Thread):
        thread = {THREAD_KEY: str(channel.id)}
        chat_id = str(channel.parent_id)
    return IncomingMessage(
        platform="discord",
        chat_id=chat_id,
        user_id=str(message.author.id),
        text=_without_mention(message.content, bot_id),
        # The unique username, not the display name anyone can set to look like someone else:
        # the runner may match allowed_users by name.
        user_name=message.author.name,
        # Anything but a DM is a group, also a guild channel discord.py has not cached.
        is_group=not isinstance(channel, discord.DMChannel),
        message_id=str(message.id),
        thread=thread,
    )


def _without_mention(text: str, bot_id: int | None) -> str:
    if bot_id is None:
        return text
    return re.sub(rf"<@!?{bot_id}>", "", text).strip()


class _IrisClient(discord.Client):
    """discord.py's client with the direct HTTP client and the message hand-off."""

    def __init__(self, *, base_url: str) -> None:
        intents = discord.Intents.default()
        intents.message_content = True  # privileged: enable it in the developer portal
        super().__init__(
            intents=intents,
            # A model's reply must never ping @everyone, a role or a user.
            allowed_mentions=discord.AllowedMentions.none(),
            http_trace=_direct_answers(),
            # Iris receives from READY on and never waits for "ready": without this,
            # discord.py's guild wait outlives close() by seconds, a task nobody owns.
            guild_ready_timeout=0.0,
        )
        http = _DirectHTTPClient(self.http, base_url)
        self.http = http
        self._connection.http = http
        self.hand_off: OnMessage | None = None  # set by connect(); None: receive nothing

    async def on_message(self, message: discord.Message) -> None:
        me = self.user
        # Never answer ourselves or another bot: two bots would talk forever.
        if self.hand_off is None or message.author.bot or (me and message.author.id == me.id):
            return
        await self.hand_off(incoming_message(message, bot_id=me.id if me else None))


class _DirectHTTPClient(HTTPClient):
    """discord.py's HTTP client at a configurable API root, with its own waiting turned off."""

    def __init__(self, base: HTTPClient, base_url: str) -> None:
        super().__init__(
            base.loop, base.connector, http_trace=base.http_trace, unsync_clock=not base.use_clock
        )
        self._base_url = base_url.rstrip("/")

    async def request(self, route: Route, **kwargs: Any) -> Any:
        # ``Route.BASE`` is process-wide; rewriting per client keeps the base URL per adapter.
        route.url = self._base_url + route.url.removeprefix(Route.BASE)
        return await super().request(route, **kwargs)

    def get_ratelimit(self, key: str) -> Ratelimit:
        try:
            return self._buckets[key]
        except KeyError:
            bucket = self._buckets[key] = _UnheededBucket(None)
            self._try_clear_expired_ratelimits()
            return bucket


class _UnheededBucket(Ratelimit):
    """A bucket that ignores X-RateLimit headers, so discord.py never sleeps ahead of a call.

    It still lets one request per bucket run at a time."""

    def update(self, response: aiohttp.ClientResponse, *, use_clock: bool = False) -> None:
        return None


def _direct_answers() -> aiohttp.TraceConfig:
    """Raise on 429 and 5xx before discord.py sees them (it would sleep and retry)."""

    async def on_request_end(
        session: aiohttp.ClientSession, ctx: SimpleNamespace, params: aiohttp.TraceRequestEndParams
    ) -> None:
        response = params.response
        if not _DIRECT.get() or (response.status != 429 and response.status < 500):
            return
        if response.status >= 500:
            # The platform received the request; whether it posted the message is unknown.
            raise PlatformError(f"discord: server error {response.status}", maybe_landed=True)
        raise PlatformRateLimited(await _retry_after(response))

    trace = aiohttp.TraceConfig()
    trace.on_request_end.append(on_request_end)
    return trace


async def _retry_after(response: aiohttp.ClientResponse) -> float:
    # The body's ``retry_after`` has millisecond precision; the header is whole seconds.
    with contextlib.suppress(ValueError, aiohttp.ClientError):
        body = await response.json(content_type=None)
        if isinstance(body, dict) and "retry_after" in body:
            return float(body["retry_after"])
    with contextlib.suppress(ValueError):
        return float(response.headers.get("Retry-After", ""))
    return 1.0

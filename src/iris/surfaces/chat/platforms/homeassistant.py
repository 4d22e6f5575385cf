"""``HomeAssistantPlatform``: the house as a chat platform, over Home Assistant's WebSocket API.

The session model: the house is one user and one chat, ``home`` (``HOME_CHAT``). Every
watched state change becomes a message in it, so the agent sees the house's recent history in
one conversation ("the front door opened; ten minutes later it is still open"), and every
answer is a notification replacing the last one (one ``notification_id``, ``iris_home``).
One chat per area would split what belongs together (the hall door and the alarm panel are in
two areas) and multiply the notifications.

The WebSocket API, as Home Assistant documents it (``/api/websocket``):

- ``auth_required`` → ``{"type": "auth", "access_token"}`` → ``auth_ok``; ``auth_invalid``
  at the first connection is a one-line start error naming ``platforms.homeassistant.token``
  (``token_env``); later (a token revoked while running) it is logged and retried with backoff;
- commands carry an ``id`` that goes up by one per connection; each is answered by a
  ``result`` frame of that id (``success``, ``result`` or ``error.{code, message}``);
- ``subscribe_events`` for ``state_changed``: each event is a frame ``type: event`` with the
  subscription's id; ``get_states`` after subscribing gives the states to compare with
  (``house_changes``: bursts coalesced per entity, a cooldown per entity, what changed while
  disconnected said once, never replayed as new);
- ``ping`` every ``ping_every`` seconds; no ``pong`` (or any frame) within ``ping_timeout``
  and the connection is taken as lost: reconnect with backoff (``BACKOFF``), authenticate,
  resubscribe, resync the states.

Answers go out whole (``capabilities.whole``: no streaming, no tool progress, never half an
answer) by ``POST /api/services/<domain>/<service>`` of the REST API: ``persistent_notification
.create`` (``title``, ``message``, ``notification_id``) or ``notify.<service>`` (the mobile
app: ``data.tag`` replaces the older notification as ``notification_id`` does). A call that
fails is retried with backoff (a notification with its id is the same notification however
often it is sent) and logged once; a refused one (4xx) is not retried.

The agent's house tools (``house_tools``) use the same connection (``command``).

A voice turn that outlived its spoken reply (``Runtime.house``, ``iris.surfaces.api.voice_later``)
is announced on ``voice.satellite`` with ``assist_satellite.announce`` over the connection (the
notification when that fails), and its Assist tools are carried out with the REST API's
``POST /api/intent/handle``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Mapping
from typing import Any, cast

import aiohttp

from iris.agent.tools import Tool
from iris.config import HOUSE_USER, HomeAssistantConfig, Rate
from iris.runtime import HouseError
from iris.surfaces.chat.budget import SharedBudget, rate_budget
from iris.surfaces.chat.platforms.base import (
    Capabilities,
    IncomingMessage,
    OnMessage,
    PlatformError,
)
from iris.surfaces.chat.platforms.house_changes import Change, Changes, State
from iris.tasks import Supervisor, logged

log = logging.getLogger(__name__)

HOME_CHAT = "home"
VOICE_CHAT = "voice"  # the notification id of voice answers that came later: iris_voice
BACKOFF = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)  # seconds between reconnects, then the last
NOTIFY_BACKOFF = (0.5, 1.0, 2.0, 4.0)  # seconds between tries of a notification
# Seconds an announcement may take: Home Assistant answers once the satellite has said it.
ANNOUNCE_WITHIN = 120.0
_MAX_FRAME = 16 * 1024 * 1024  # get_states of a large house is megabytes


class HomeAssistantError(PlatformError):
    """A command Home Assistant answered with ``success: false``: its ``code`` and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"homeassistant: {code}: {message}")
        self.code = code


class AuthRefused(PlatformError):
    """``auth_invalid``: the token is wrong or was revoked."""


def notification_id(chat_id: str) -> str:
    """One id per conversation: a newer answer replaces the older notification."""
    return f"iris_{chat_id}"


class HomeAssistantPlatform:
    name = "homeassistant"
    capabilities: Capabilities
    budget: SharedBudget

    def __init__(self, settings: HomeAssistantConfig) -> None:
        self.token = settings.resolved_token()
        if not self.token:
            where = f" (or ${settings.token_env})" if settings.token_env else ""
            raise PlatformError(f"platforms.homeassistant.token{where} is empty")
        self.settings = settings
        # A notification can be long; never more than one per answer.
        self.capabilities = Capabilities(
            can_edit=False,
            max_length=100_000,
            length_unit="chars",
            rate=rate_budget(Rate(calls=30, per=60.0)),
            whole=True,
        )
        self.budget = SharedBudget([], {})
        self.ping_every, self.ping_timeout = 30.0, 10.0
        self.backoff: tuple[float, ...] = BACKOFF
        self.notify_backoff: tuple[float, ...] = NOTIFY_BACKOFF
        self.changes = Changes(settings.watch, settings.debounce)
        self._http: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._subscription = 0
        self._on_message: OnMessage | None = None
        self._wake = asyncio.Event()
        self._tasks = Supervisor()  # the connection and the changes' delivery
        self._gone = asyncio.Event()  # the current connection is lost
        self.connected = asyncio.Event()
        self.connections = 0  # how many times it authenticated (tests, logs)

    @property
    def _base(self) -> str:
        return self.settings.url.rstrip("/")

    # -- the connection -----------------------------------------------------------------------
    async def connect(self, on_message: OnMessage) -> None:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        try:
            states = await self._open()
        except PlatformError:
            await self._close_http()
            raise
        self.changes.baseline(states)
        self._on_message = on_message
        self._spawn(self._keep_connected(), "homeassistant connection")
        self._spawn(self._deliver_changes(), "homeassistant changes")

    async def disconnect(self) -> None:
        await self._tasks.close()  # cancels both, awaits them
        await self._drop()
        await self._close_http()

    def _spawn(self, work: Any, name: str) -> None:
        self._tasks.create_task(logged(work, name), name=name)

    async def _close_http(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.close()

    async def _open(self) -> list[State]:
        """Connect, authenticate, subscribe; the states now."""
        assert self._http is not None
        url = self._base.replace("http", "ws", 1) + "/api/websocket"
        try:
            ws = await self._http.ws_connect(url, max_msg_size=_MAX_FRAME, heartbeat=None)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise PlatformError(f"homeassistant: cannot connect to {url}: {exc}") from None
        try:
            await self._authenticate(ws)
        except BaseException:
            await ws.close()
            raise
        self._ws, self._ids, self._gone = ws, itertools.count(1), asyncio.Event()
        self._spawn(self._read(ws), "homeassistant reader")
        try:
            self._subscription = next(self._ids)
            subscribe = {"type": "subscribe_events", "event_type": "state_changed"}
            await self._command({"id": self._subscription, **subscribe})
            states = await self.command({"type": "get_states"})
        except PlatformError:
            await self._drop()
            raise
        self.connections += 1
        self.connected.set()
        return cast(list[State], states) if isinstance(states, list) else []

    async def _authenticate(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        try:
            async with asyncio.timeout(self.ping_timeout):
                first = await ws.receive_json()
                if first.get("type") == "auth_required":
                    await ws.send_json({"type": "auth", "access_token": self.token})
                    first = await ws.receive_json()
        except (TimeoutError, aiohttp.ClientError, TypeError, ValueError) as exc:
            raise PlatformError(f"homeassistant: no auth handshake: {exc!r}") from None
        if not isinstance(first, dict):
            raise PlatformError("homeassistant: the auth handshake was not an object")
        first = cast(dict[str, Any], first)
        if first.get("type") == "auth_invalid":
            name = "platforms.homeassistant.token"
            if not self.settings.token and self.settings.token_env:
                name = f"platforms.homeassistant.token_env (${self.settings.token_env})"
            why = first.get("message") or "invalid access token"
            raise AuthRefused(f"homeassistant: {name} was refused: {why}")
        if first.get("type") != "auth_ok":
            raise PlatformError(f"homeassistant: unexpected answer to auth: {first.get('type')}")

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """Every frame of one connection, until it closes."""
        try:
            async for frame in ws:
                if frame.type == aiohttp.WSMsgType.TEXT:
                    with contextlib.suppress(ValueError, RecursionError):
                        self._frame(json.loads(frame.data))
        finally:
            self._lost(ws)

    def _frame(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        frame = cast(dict[str, Any], message)
        future = self._waiting.pop(frame.get("id", -1), None)
        if frame.get("type") == "event" and frame.get("id") == self._subscription:
            self._event(frame.get("event"))
        elif future is None or future.done():
            pass
        elif frame.get("type") == "pong":
            future.set_result(None)
        elif frame.get("success") is True:
            future.set_result(frame.get("result"))
        else:
            error = frame.get("error")
            error = cast(dict[str, Any], error) if isinstance(error, dict) else {}
            code, text = str(error.get("code", "unknown")), str(error.get("message", ""))
            future.set_exception(HomeAssistantError(code, text))

    def _event(self, event: Any) -> None:
        data = event.get("data") if isinstance(event, dict) else None
        if not isinstance(data, dict):
            return
        data = cast(dict[str, Any], data)
        entity_id = data.get("entity_id")
        if isinstance(entity_id, str):
            now = asyncio.get_running_loop().time()
            self.changes.offer(
                entity_id, _state(data.get("old_state")), _state(data.get("new_state")), now
            )
            self._wake.set()

    def _lost(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        if self._ws is not ws:
            return
        self._ws = None
        self._gone.set()
        self.connected.clear()
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(PlatformError("homeassistant: connection lost"))

    async def _drop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            self._lost(ws)
            await ws.close()
        self.connected.clear()

    async def command(self, command: Mapping[str, Any], within: float = 30.0) -> Any:
        """One command on the connection (its ``id`` given here); its ``result``."""
        return await self._command({**command, "id": next(self._ids)}, within)

    async def _command(self, command: dict[str, Any], within: float = 30.0) -> Any:
        ws = self._ws
        if ws is None or ws.closed:
            raise PlatformError("homeassistant: not connected")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[command["id"]] = future
        try:
            await ws.send_json(command)
            async with asyncio.timeout(within):
                return await future
        except (aiohttp.ClientError, ConnectionError) as exc:
            raise PlatformError(f"homeassistant: connection lost: {exc}") from None
        except TimeoutError:
            raise PlatformError("homeassistant: no answer in time", maybe_landed=True) from None
        finally:
            self._waiting.pop(command["id"], None)

    async def _keep_connected(self) -> None:
        """Ping while connected; once lost, reconnect with backoff and resync the states."""
        while True:
            await self._keep_alive()
            await self._drop()
            log.warning("homeassistant: connection lost; reconnecting")
            states = await self._reconnect()
            self.changes.resync(states, asyncio.get_running_loop().time())
            self._wake.set()
            log.info("homeassistant: reconnected and resubscribed")

    async def _keep_alive(self) -> None:
        """Returns once the connection is lost (closed, or no pong in time)."""
        while not self._gone.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.ping_every):
                    await self._gone.wait()
                    return
            try:
                await self.command({"type": "ping"}, self.ping_timeout)
            except PlatformError:
                return

    async def _reconnect(self) -> list[State]:
        refused = False
        for attempt in itertools.count():
            await asyncio.sleep(self.backoff[min(attempt, len(self.backoff) - 1)])
            try:
                return await self._open()
            except AuthRefused as exc:
                if not refused:  # a revoked token: said once, tried again with backoff
                    log.error("%s; retrying", exc)
                refused = True
            except PlatformError as exc:
                log.info("homeassistant: reconnect failed: %s", exc)
        raise AssertionError("unreachable")

    # -- state changes into messages --------------------------------------------------------
    async def _deliver_changes(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = self.changes.due(loop.time())
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(None if due is None else max(0.0, due - loop.time())):
                    await self._wake.wait()
            changes = self.changes.take(loop.time())
            if changes and self._on_message is not None:
                await self._on_message(_message(changes))

    # -- sending ------------------------------------------------------------------------------
    async def send(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        """The answer as one notification (see the module); its ``notification_id``."""
        ident = notification_id(chat_id)
        domain, _, service = self.settings.notify.partition(".")
        if domain == "persistent_notification":
            service = "create"
            data: dict[str, Any] = {"title": self.settings.title, "message": text}
            data["notification_id"] = ident
        else:
            data = {"title": self.settings.title, "message": text, "data": {"tag": ident}}
        await self.call_service_rest(domain, service, data)
        return ident

    async def call_service_rest(self, domain: str, service: str, data: dict[str, Any]) -> None:
        """``POST /api/services/<domain>/<service>``, retried with backoff, logged once."""
        failures = 0
        for wait in (*self.notify_backoff, None):
            try:
                await self._post(f"/api/services/{domain}/{service}", data)
            except _Retry as exc:
                if failures == 0:
                    log.warning("homeassistant: %s.%s failed, retrying: %s", domain, service, exc)
                failures += 1
                if wait is None:
                    raise PlatformError(f"homeassistant: {domain}.{service}: {exc}") from None
                await asyncio.sleep(wait)
                continue
            if failures:
                log.info(
                    "homeassistant: %s.%s went through after %d tries",
                    domain,
                    service,
                    failures + 1,
                )
            return

    async def _post(self, path: str, data: dict[str, Any]) -> str:
        """One REST call with the token; the answer's body."""
        http = self._http
        if http is None:
            raise PlatformError("homeassistant: not connected")
        headers = {"Authorization": f"Bearer {self.token}"}
        try:
            async with http.post(
                self._base + path, json=data, headers=headers, timeout=aiohttp.ClientTimeout(15)
            ) as answer:
                body = await answer.text()
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise _Retry(str(exc) or type(exc).__name__) from None
        if answer.status >= 500 or answer.status == 429:
            raise _Retry(f"HTTP {answer.status}")
        if answer.status >= 400:
            raise PlatformError(f"homeassistant: {path} refused: HTTP {answer.status} {body[:200]}")
        return body

    def tools(self) -> list[Tool]:
        """The agent's house tools over this connection (``house_tools``)."""
        from iris.surfaces.chat.platforms.house_tools import house_tools

        return house_tools(self)

    # -- voice turns that outlived their spoken reply (``Runtime.house``) ---------------------
    async def announce(self, text: str) -> None:
        """A voice turn's later answer: spoken by ``voice.satellite``
        (``assist_satellite.announce`` over the connection, which returns once it was said),
        else, or when that fails, a notification (``iris_voice``)."""
        satellite = self.settings.voice.satellite
        if satellite is not None:
            try:
                await self.command(
                    {
                        "type": "call_service",
                        "domain": "assist_satellite",
                        "service": "announce",
                        "service_data": {"message": text},
                        "target": {"entity_id": satellite},
                    },
                    within=ANNOUNCE_WITHIN,
                )
                return
            except PlatformError as exc:
                log.warning("homeassistant: %s could not announce; notifying: %s", satellite, exc)
        await self.send(VOICE_CHAT, text)

    async def handle_intent(self, name: str, data: dict[str, Any]) -> dict[str, Any]:
        """``POST /api/intent/handle``: one of Assist's intents, as its own tool call would
        run it (``assistant: conversation``: only entities exposed to Assist match). Tried
        once: an intent acts on the house, so one that may have landed is not sent again."""
        asked = {"name": name, "data": data, "assistant": "conversation"}
        try:
            body = await self._post("/api/intent/handle", asked)
        except (_Retry, PlatformError) as exc:
            raise HouseError(f"Home Assistant did not handle {name}: {exc}") from None
        try:
            answer = json.loads(body)
        except ValueError:
            raise HouseError(f"Home Assistant answered {name} with no JSON") from None
        if not isinstance(answer, dict):
            raise HouseError(f"Home Assistant answered {name} with no object")
        return cast(dict[str, Any], answer)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        raise PlatformError("homeassistant: answers go out whole, never edited")

    async def send_typing(self, chat_id: str, *, thread: Mapping[str, str] | None = None) -> None:
        return None  # a house has no typing indicator


class _Retry(Exception):
    """A REST call that may work a moment later (no answer, 5xx, 429)."""


def _state(value: Any) -> State | None:
    return cast(State, value) if isinstance(value, dict) else None


def _message(changes: list[Change]) -> IncomingMessage:
    lines = "\n".join(change.line() for change in changes)
    text = f"Home Assistant reports:\n{lines}"
    return IncomingMessage(
        platform="homeassistant",
        chat_id=HOME_CHAT,
        user_id=HOUSE_USER,
        text=text,
        user_name="Home Assistant",
    )

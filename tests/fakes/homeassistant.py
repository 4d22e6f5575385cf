"""A stand-in for Home Assistant's WebSocket and REST APIs on 127.0.0.1.

    async with HomeAssistant(states={"binary_sensor.front_door": "off"}) as ha:
        # ha.url -> platforms.homeassistant.url, ha.token -> platforms.homeassistant.token
        await ha.set_state("binary_sensor.front_door", "on")
        await ha.wait_until(lambda: ha.notifications)

The message shapes are Home Assistant's, as its developer docs (``docs/api/websocket``,
``docs/api/rest``) and its ``websocket_api`` component define them, and as a real client library
(``hass-client``) parses them (``tests/chat/homeassistant/test_standin_wire.py``):

- ``/api/websocket``: ``{"type": "auth_required", "ha_version"}``; the client's first frame
  must be ``{"type": "auth", "access_token"}``, answered ``auth_ok`` or ``auth_invalid``
  (``message``) and the socket closed. Then every command is an object with an integer ``id``
  greater than the last one of the connection (else ``id_reuse``) and a ``type``; keys a
  command does not take are ``invalid_format`` (its schemas prevent extra keys), an unknown
  type ``unknown_command``. Answers are ``{"id", "type": "result", "success", "result"}`` or
  ``{"id", "type": "result", "success": false, "error": {"code", "message"}}``; ``ping`` is
  answered ``{"id", "type": "pong"}``.
- ``subscribe_events`` (``event_type``): each matching event is
  ``{"id", "type": "event", "event": {"event_type", "data", "origin", "time_fired",
  "context"}}``; a ``state_changed`` event's data is ``{"entity_id", "old_state",
  "new_state"}``, states being ``{"entity_id", "state", "attributes", "last_changed",
  "last_updated", "context"}``.
- ``get_states``; ``call_service`` (``domain``, ``service``, ``service_data``, ``target``,
  ``return_response``): kept in ``service_calls``; ``light``/``switch`` ``turn_on`` /
  ``turn_off`` / ``toggle`` change the targets' states (and fire their events); an entity or
  service that does not exist is ``not_found``.
- ``call_service`` of ``assist_satellite.announce`` (``service_data.message``, ``target
  .entity_id``: an ``assist_satellite`` entity the house has, else ``not_found``): kept in
  ``announcements`` as (entity id, message).
- REST ``POST /api/intent/handle`` (``IntentHandleView`` of Home Assistant's ``intent``
  component: ``name``, optional ``data``, ``language``, ``assistant``, ``device_id``,
  ``satellite_id``, nothing else): kept in ``intents``; ``HassTurnOn`` / ``HassTurnOff`` with
  ``data.name`` switch the entity of that friendly name (case-insensitive) and answer the
  intent response (``response_type: action_done``, ``data.success``), a name that matches
  nothing an ``error`` response (``no_valid_targets``); an intent Home Assistant does not have
  is its 500 (``UnknownIntent`` is not caught by the view).
- REST ``POST /api/services/<domain>/<service>`` with ``Authorization: Bearer``: 401 without
  the token; ``persistent_notification.create`` and ``notify.*`` calls are kept in
  ``notifications`` (a ``persistent_notification`` with the ``notification_id`` of an older one
  replaces it in ``shown``); ``fail_next`` answers the next calls with a 500.

``drop()`` closes every connection (a restart of Home Assistant, a network cut); ``mute``
stops answering anything (a half-open connection: pings go unanswered).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

VERSION = "2026.8.0"
# What each command takes besides ``id`` and ``type`` (its schema prevents any other key).
_KEYS: dict[str, frozenset[str]] = {
    "subscribe_events": frozenset({"event_type"}),
    "unsubscribe_events": frozenset({"subscription"}),
    "get_states": frozenset(),
    "ping": frozenset(),
    "call_service": frozenset({"domain", "service", "service_data", "target", "return_response"}),
}


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class Notification:
    domain: str
    service: str
    data: dict[str, Any]

    @property
    def message(self) -> str:
        return str(self.data.get("message", ""))


@dataclass
class HomeAssistant:
    states: dict[str, Any] = field(default_factory=dict[str, Any])  # entity -> state (str)
    token: str = "hass-long-lived-token"
    frames: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])  # client -> HA
    errors: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])  # error results
    service_calls: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    notifications: list[Notification] = field(default_factory=list[Notification])
    announcements: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    intents: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    shown: dict[str, str] = field(default_factory=dict[str, str])  # notification_id -> message
    rest_calls: int = 0
    connections: int = 0  # sockets that authenticated
    subscriptions: int = 0
    mute: bool = False
    port: int = 0
    _fail: int = 0
    _full: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    _sockets: list[tuple[web.WebSocketResponse, dict[int, str]]] = field(
        default_factory=list[tuple[web.WebSocketResponse, dict[int, str]]]
    )
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None
    _context: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> HomeAssistant:
        for entity_id, value in self.states.items():
            self._full[entity_id] = self._state(entity_id, value, {})
        app = web.Application()
        app.router.add_get("/api/websocket", self._websocket)
        app.router.add_get("/api/", self._api_root)
        app.router.add_post("/api/services/{domain}/{service}", self._rest_service)
        app.router.add_post("/api/intent/handle", self._intent)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        server = site._server  # pyright: ignore[reportPrivateUsage]
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.drop()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- what a test does ---------------------------------------------------------------------
    async def set_state(self, entity_id: str, state: str, **attributes: Any) -> None:
        """Change an entity's state, as a device would: a ``state_changed`` to subscribers."""
        old = self._full.get(entity_id)
        base = dict(old["attributes"]) if old is not None else {}
        new = self._state(entity_id, state, {**base, **attributes})
        self._full[entity_id] = new
        self.states[entity_id] = state
        data = {"entity_id": entity_id, "old_state": old, "new_state": new}
        await self._fire("state_changed", data)

    def quietly(self, entity_id: str, state: str) -> None:
        """Change a state without an event reaching anyone (while nobody is connected)."""
        old = self._full.get(entity_id)
        attributes = dict(old["attributes"]) if old is not None else {}
        self._full[entity_id] = self._state(entity_id, state, attributes)
        self.states[entity_id] = state

    async def drop(self) -> None:
        sockets, self._sockets = self._sockets, []
        for ws, _ in sockets:
            await ws.close()
        self._changed.set()

    def fail_next(self, times: int) -> None:
        """Answer the next ``times`` REST service calls with a 500."""
        self._fail = times

    def sent(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("type") == kind]

    async def wait_until(self, done: Callable[[], object], within: float = 10.0) -> None:
        async with asyncio.timeout(within):
            while not done():
                self._changed.clear()
                await self._changed.wait()

    # -- the WebSocket API ----------------------------------------------------------------
    def _state(self, entity_id: str, state: str, attributes: dict[str, Any]) -> dict[str, Any]:
        now = _now()
        friendly = entity_id.split(".", 1)[1].replace("_", " ").title()
        return {
            "entity_id": entity_id,
            "state": state,
            "attributes": {"friendly_name": friendly, **attributes},
            "last_changed": now,
            "last_updated": now,
            "context": {"id": f"ctx{next(self._context)}", "parent_id": None, "user_id": None},
        }

    async def _fire(self, event_type: str, data: dict[str, Any]) -> None:
        for ws, subscribed in list(self._sockets):
            for sub_id, wanted in subscribed.items():
                if wanted in (event_type, "*") and not ws.closed:
                    event = {
                        "event_type": event_type,
                        "data": data,
                        "origin": "LOCAL",
                        "time_fired": _now(),
                        "context": {"id": f"ctx{next(self._context)}"},
                    }
                    await ws.send_json({"id": sub_id, "type": "event", "event": event})
        self._changed.set()

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"type": "auth_required", "ha_version": VERSION})
        first = await ws.receive()
        auth = first.json() if first.type == WSMsgType.TEXT else {}
        self.frames.append(auth)
        if set(auth) != {"type", "access_token"} or auth.get("access_token") != self.token:
            await ws.send_json({"type": "auth_invalid", "message": "Invalid access token"})
            await ws.close()
            self._changed.set()
            return ws
        await ws.send_json({"type": "auth_ok", "ha_version": VERSION})
        self.connections += 1
        subscribed: dict[int, str] = {}
        self._sockets.append((ws, subscribed))
        self._changed.set()
        await self._commands(ws, subscribed)
        return ws

    async def _commands(self, ws: web.WebSocketResponse, subscribed: dict[int, str]) -> None:
        last = 0
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                continue
            frame = message.json()
            self.frames.append(frame)
            self._changed.set()
            if self.mute:
                continue
            ident = frame.get("id")
            if not isinstance(ident, int) or ident <= last:
                await self._error(ws, ident, "id_reuse", "Identifier values have to increase.")
                continue
            last = ident
            await self._command(ws, subscribed, frame)

    async def _command(
        self, ws: web.WebSocketResponse, subscribed: dict[int, str], frame: dict[str, Any]
    ) -> None:
        ident, kind = frame["id"], frame.get("type")
        if kind not in _KEYS:
            await self._error(ws, ident, "unknown_command", "Unknown command.")
            return
        extra = set(frame) - {"id", "type"} - _KEYS[kind]
        if extra:
            await self._error(ws, ident, "invalid_format", f"extra keys not allowed: {extra}")
            return
        match kind:
            case "ping":
                await ws.send_json({"id": ident, "type": "pong"})
            case "subscribe_events":
                subscribed[ident] = frame.get("event_type", "*")
                self.subscriptions += 1
                await self._result(ws, ident, None)
            case "get_states":
                await self._result(ws, ident, list(self._full.values()))
            case "call_service":
                await self._call_service(ws, frame)
            case _:
                await self._result(ws, ident, None)

    async def _call_service(self, ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        self.service_calls.append(frame)
        domain, service = frame.get("domain"), frame.get("service")
        target = frame.get("target") or {}
        entities = target.get("entity_id") or []
        entities = [entities] if isinstance(entities, str) else entities
        missing = [e for e in entities if e not in self._full]
        if domain == "assist_satellite" and service == "announce" and entities and not missing:
            message = str((frame.get("service_data") or {}).get("message", ""))
            self.announcements.extend((entity_id, message) for entity_id in entities)
            await self._result(ws, frame["id"], {"context": {"id": "ctx-call"}, "response": None})
            return
        if missing or domain not in ("light", "switch", "homeassistant"):
            await self._error(
                ws, frame["id"], "not_found", f"Entity or service not found: {missing}"
            )
            return
        for entity_id in entities:
            state = {"turn_on": "on", "turn_off": "off"}.get(str(service))
            if service == "toggle":
                state = "off" if self._full[entity_id]["state"] == "on" else "on"
            if state is not None:
                await self.set_state(entity_id, state)
        await self._result(ws, frame["id"], {"context": {"id": "ctx-call"}, "response": None})

    async def _result(self, ws: web.WebSocketResponse, ident: int, result: Any) -> None:
        await ws.send_json({"id": ident, "type": "result", "success": True, "result": result})

    async def _error(self, ws: web.WebSocketResponse, ident: Any, code: str, text: str) -> None:
        answer = {
            "id": ident,
            "type": "result",
            "success": False,
            "error": {"code": code, "message": text},
        }
        self.errors.append(answer)
        await ws.send_json(answer)

    # -- the REST API ---------------------------------------------------------------------
    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {self.token}"

    async def _api_root(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"message": "Unauthorized"}, status=401)
        return web.json_response({"message": "API running."})

    async def _rest_service(self, request: web.Request) -> web.Response:
        self.rest_calls += 1
        self._changed.set()
        if not self._authorized(request):
            return web.json_response({"message": "Unauthorized"}, status=401)
        if self._fail:
            self._fail -= 1
            return web.json_response({"message": "Internal Server Error"}, status=500)
        domain, service = request.match_info["domain"], request.match_info["service"]
        data = await request.json()
        if domain not in ("persistent_notification", "notify") or "message" not in data:
            return web.json_response({"message": "Service not found."}, status=400)
        self.notifications.append(Notification(domain, service, data))
        ident = data.get("notification_id") or (data.get("data") or {}).get("tag") or ""
        self.shown[str(ident)] = str(data["message"])
        return web.json_response([])

    async def _intent(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"message": "Unauthorized"}, status=401)
        body = await request.json()
        allowed = {"name", "data", "language", "assistant", "device_id", "satellite_id"}
        if not isinstance(body, dict) or "name" not in body or set(body) - allowed:
            return web.json_response({"message": "Message format incorrect"}, status=400)
        self.intents.append(body)
        self._changed.set()
        name, data = body["name"], body.get("data") or {}
        if name not in ("HassTurnOn", "HassTurnOff"):
            return web.Response(status=500, text="500 Internal Server Error")
        wanted = str(data.get("name", "")).lower()
        found = [
            state
            for state in self._full.values()
            if state["attributes"].get("friendly_name", "").lower() == wanted
        ]
        if not found:
            return web.json_response(_intent_error(f"No device or entity named {wanted}"))
        for state in found:
            await self.set_state(state["entity_id"], "on" if name == "HassTurnOn" else "off")
        verb = "Turned on" if name == "HassTurnOn" else "Turned off"
        success = [
            {"name": s["attributes"]["friendly_name"], "type": "entity", "id": s["entity_id"]}
            for s in found
        ]
        return web.json_response(
            {
                "speech": {"plain": {"speech": f"{verb} the {wanted}", "extra_data": None}},
                "card": {},
                "language": "en",
                "response_type": "action_done",
                "data": {"targets": [], "success": success, "failed": []},
            }
        )


def _intent_error(text: str) -> dict[str, Any]:
    """An intent response of ``response_type: error``, as ``IntentResponse.as_dict`` writes it."""
    return {
        "speech": {"plain": {"speech": text, "extra_data": None}},
        "card": {},
        "language": "en",
        "response_type": "error",
        "data": {"code": "no_valid_targets"},
    }

"""The iris WebSocket transport: ``GET /iris/ws``, one task pair per connected device.

Connect, authenticate (``Authorization: Bearer <token>``, else a first ``hello`` frame within
``HELLO_TIMEOUT``), then two loops run until the device goes: the sender writes whatever the
device's subscription yields; the receiver parses the device's frames and acts on them. Bad
input gets an ``error`` frame and nothing else happens; more than ``BAD_FRAMES_PER_MINUTE``
closes the socket with 1008. A bad or missing token closes with 4401 before anything is sent;
with ``platforms.iris.tokens`` empty every device is refused (secure by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections import deque
from typing import Any, assert_never

from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from iris.fanout.framelog import FrameLog
from iris.fanout.hub import Hub
from iris.fanout.subscription import Subscription
from iris.runtime import Runtime
from iris.surfaces.iris import inbound
from iris.surfaces.iris.room import ChatRoom

log = logging.getLogger(__name__)

DEFAULT_CHAT = "main"  # every device of the same owner shares one conversation by default
HELLO_TIMEOUT = 10.0
BAD_FRAMES_PER_MINUTE = 20
CLOSE_UNAUTHORIZED = 4401
CLOSE_POLICY = 1008


class IrisSurface:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.config.platforms.iris
        self.hub = Hub(
            FrameLog(
                runtime.store,
                max_frames=self.settings.log_max_frames,
                max_age=self.settings.log_max_age,
            ),
            queue_size=self.settings.queue_size,
        )
        self.rooms: dict[str, ChatRoom] = {}

    def routes(self) -> list[BaseRoute]:
        return [WebSocketRoute("/iris/ws", self._endpoint)]

    async def start(self) -> None:
        # Turns a crash cut are closed now, on devices and in the model's history alike.
        for chat_id in await self.hub.log.open_turns():
            self.room(chat_id)
        if not self.settings.tokens:
            log.warning(
                "platforms.iris.tokens is empty: the iris socket refuses every device; "
                "add a device token to use iris app"
            )

    async def stop(self) -> None:
        await asyncio.gather(*(room.close() for room in self.rooms.values()))

    def room(self, chat_id: str) -> ChatRoom:
        if chat_id not in self.rooms:
            room = self.rooms[chat_id] = ChatRoom(self.runtime, self.hub, chat_id)
            room.recover()
        return self.rooms[chat_id]

    # -- one connection ------------------------------------------------------------------------
    async def _endpoint(self, ws: WebSocket) -> None:
        await ws.accept()
        hello = await self._authenticate(ws)
        if hello is None:
            await _close(ws, CLOSE_UNAUTHORIZED, "unauthorized")
            return
        room = self.room(hello.chat_id or DEFAULT_CHAT)
        subscription = self.hub.subscribe(room.chat_id)
        subscription.send_local({"type": "ready"})
        if hello.after_seq is not None:
            subscription.resume(hello.after_seq)
        connection = _Connection(self, ws, room, subscription)
        try:
            await connection.run()
        finally:
            self.hub.unsubscribe(subscription)

    async def _authenticate(self, ws: WebSocket) -> inbound.Hello | None:
        header = ws.headers.get("authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not self._token_ok(token.strip()):
                return None
            query = ws.query_params
            chat_id, after = query.get("chat_id"), query.get("after_seq")
            if chat_id is not None and not inbound.valid_chat_id(chat_id):
                return None
            after_seq = int(after) if after is not None and after.isdigit() else None
            return inbound.Hello(token, chat_id, after_seq)
        try:
            async with asyncio.timeout(HELLO_TIMEOUT):
                message = await ws.receive()
        except TimeoutError:
            return None
        if message["type"] != "websocket.receive":
            return None
        request = inbound.parse(_payload(message), max_text=self.settings.max_text)
        if isinstance(request, inbound.Hello) and self._token_ok(request.token):
            return request
        return None

    def _token_ok(self, token: str) -> bool:
        # No tokens configured: nobody gets in. Compare against every token in constant time: no early exit leaks which one matched.
        found = False
        for known in self.settings.tokens:
            found |= hmac.compare_digest(token.encode(), known.encode())
        return found and bool(token)


class _Connection:
    def __init__(
        self, surface: IrisSurface, ws: WebSocket, room: ChatRoom, subscription: Subscription
    ) -> None:
        self.surface = surface
        self.ws = ws
        self.room = room
        self.subscription = subscription
        self._bad: deque[float] = deque()

    async def run(self) -> None:
        # The receiver runs in the connection's own task: one task less per idle device. A
        # socket the sender can no longer write to also ends the receiver (disconnect).
        sender = asyncio.create_task(self._send_loop())
        try:
            await self._receive_loop()
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender

    async def _send_loop(self) -> None:
        ws = self.ws
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            while True:
                await ws.send_text(await self.subscription.get_json())

    async def _receive_loop(self) -> None:
        max_text = self.surface.settings.max_text
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            request = inbound.parse(_payload(message), max_text=max_text)
            if isinstance(request, inbound.BadFrame):
                if self._too_many_bad():
                    await _close(self.ws, CLOSE_POLICY, "too many bad frames")
                    return
                self._error(request.code, request.message)
                continue
            self._handle(request)

    def _handle(self, request: inbound.Request) -> None:
        match request:
            case inbound.Ping():
                self.subscription.send_local({"type": "pong"})
            case inbound.SendMessage(text=text, chat_id=chat_id):
                if chat_id is not None and chat_id != self.room.chat_id:
                    self._error("wrong_chat", f"this connection is on chat {self.room.chat_id!r}")
                elif not self.room.send(text, origin=self.subscription):
                    self._error("turn_active", "a turn is running; cancel it or wait for it")
            case inbound.CancelTurn():
                if not self.room.cancel():
                    self._error("no_turn", "no turn is running")
            case inbound.Resume(after_seq=after_seq):
                self.subscription.resume(after_seq)
            case inbound.Hello():
                self._error("unexpected_hello", "already authenticated")
            case _:
                assert_never(request)

    def _error(self, code: str, message: str) -> None:
        self.subscription.send_local({"type": "error", "code": code, "message": message})

    def _too_many_bad(self) -> bool:
        now = time.monotonic()
        self._bad.append(now)
        while self._bad and self._bad[0] < now - 60.0:
            self._bad.popleft()
        return len(self._bad) > BAD_FRAMES_PER_MINUTE


def _payload(message: Any) -> str | bytes | None:
    text = message.get("text")
    return text if text is not None else message.get("bytes")


async def _close(ws: WebSocket, code: int, reason: str) -> None:
    # A device that stopped reading keeps the socket unwritable; do not wait on it forever.
    with contextlib.suppress(Exception):
        async with asyncio.timeout(2.0):
            await ws.close(code, reason)

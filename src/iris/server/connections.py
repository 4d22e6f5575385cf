"""The HTTP connection guard: deadlines for request heads and bodies, body caps, and a cap on
open connections.

uvicorn closes an idle keep-alive connection (``timeout_keep_alive``) but gives a connection
that has not finished sending a request's line and headers all the time it wants: a silent
socket, or one that trickles a header line every few seconds (slowloris), is held forever, and
a few hundred of them use up the process's file descriptors until ``/health`` fails.

``guarded_protocol`` returns uvicorn's HTTP protocol class with two additions:

- a head deadline: from the moment a connection opens, or the first byte of a next request on
  a kept-alive one, the request line and headers must be complete within ``head_timeout``
  seconds, else the connection is closed;
- a head size cap: more than ``MAX_HEAD_BYTES`` before the head is complete closes it;
- a connection cap: a connection that opens past ``max_connections`` closes the oldest one
  still sending its request — head or body (an attacker's, most likely) — or itself when every
  connection is busy with a request that has arrived whole. WebSockets count toward the cap but
  are never closed by it.

``BodyGuard`` is the ASGI middleware that gives every request body, whatever route reads it,
a deadline (``server.timeout_body`` from the end of the head: 408) and the route's size cap (a
declared ``Content-Length`` over it is 413 before a byte of the body is read; a chunked body
that grows past it is 413 when it does). Before it, each route read its body itself and one
forgot the deadline: 1 000 POSTs trickling a byte every 5 s into the WhatsApp webhook held every
connection the cap allowed, and ``/health``, the API and the socket were refused for minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import resource
import time
from collections.abc import Callable
from typing import Any, NoReturn

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.auto import AutoHTTPProtocol

log = logging.getLogger("iris.server")

# File descriptors kept free for everything that is not a client connection: the store, the
# upstream's connections, log files, the chat platforms' sockets.
_RESERVED_FILES = 64
# Request line and headers; an OpenAI SDK request's head is under 2 KiB.
MAX_HEAD_BYTES = 64 * 1024


def connection_cap(wanted: int) -> int:
    """``wanted``, lowered to fit the open-file limit (raised to its hard limit first), so the
    cap evicts before ``accept`` fails for want of a descriptor."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = 65536 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    room = max(soft - _RESERVED_FILES, 8)
    if wanted > room:
        log.warning(
            "server.max_connections %d lowered to %d: the open-file limit is %d", wanted, room, soft
        )
        return room
    return wanted


_AUTO: Any = AutoHTTPProtocol  # httptools, else h11: untyped


class GuardedHTTPProtocol(_AUTO):
    """uvicorn's HTTP protocol with a deadline for a request's head (``head_timeout``) and a
    cap on open connections (``max_connections``: past it, the one longest in its head goes)."""

    head_timeout: float = 0.0
    max_connections: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_since = 0.0
        self._head_bytes = 0
        self._cycle_seen: Any = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()
        if len(self.connections) > self.max_connections:
            self._evict()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.get_protocol() is not self:
            self._disarm()  # upgraded to a WebSocket: not ours to time any more
        elif self.cycle is not self._cycle_seen:
            self._cycle_seen = self.cycle  # a head is complete: its request runs
            self._disarm()
        elif self.cycle is None or self.cycle.response_complete:
            self._arm()  # bytes of a next request's head on a kept-alive connection
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._head_timed_out()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def sending_request(self) -> bool:
        """Still sending its request's head, or the body of one whose head is in."""
        if self._head_timer is not None:
            return True
        cycle = self.cycle
        return cycle is not None and cycle.more_body and not cycle.response_complete

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_since = time.monotonic()
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        self._head_bytes = 0
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _evict(self) -> None:
        waiting = [
            c
            for c in self.connections
            if isinstance(c, GuardedHTTPProtocol) and c.sending_request() and c is not self
        ]
        victim = min(waiting, key=lambda c: c._head_since) if waiting else self
        victim._disarm()
        victim.transport.close()


def guarded_protocol(head_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools, else h11) with a head deadline and a connection cap."""
    settings = {"head_timeout": head_timeout, "max_connections": max_connections}
    return type("GuardedHTTPProtocol", (GuardedHTTPProtocol,), settings)


class BodyRefused(Exception):
    """Raised into the app from ``receive`` once ``BodyGuard`` has answered 408 or 413."""


class BodyGuard:
    """A deadline and a size cap on every request body (see the module doc).

    ``cap_for(path)`` is the most bytes a route takes. The app reads its body as it likes
    (``request.stream()``, ``request.body()``); past the deadline or the cap the guard answers
    itself, with ``Connection: close``, raises ``BodyRefused`` out of the app's ``receive`` and
    drops whatever the app sends after."""

    def __init__(self, app: ASGIApp, timeout: float, cap_for: Callable[[str], int]) -> None:
        self.app = app
        self.timeout = timeout
        self.cap_for = cap_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = self.cap_for(scope["path"])
        declared = _content_length(scope)
        if declared is not None and declared > cap:
            await _refuse(send, 413, f"The request body is larger than {cap} bytes.")
            return
        deadline = asyncio.get_running_loop().time() + self.timeout
        received = 0
        whole = False  # the body has arrived: later receives wait for a disconnect, untimed
        started = refused = False

        async def refuse(status: int, message: str) -> NoReturn:
            nonlocal refused
            refused = True
            if not started:
                await _refuse(send, status, message)
            raise BodyRefused(message)

        async def guarded_receive() -> Message:
            nonlocal received, whole
            if whole:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                await refuse(408, f"The request body took longer than {self.timeout:g} s.")
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    await refuse(413, f"The request body is larger than {cap} bytes.")
                whole = not message.get("more_body", False)
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the guard has answered
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        with contextlib.suppress(BodyRefused):
            await self.app(scope, guarded_receive, guarded_send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            # (the HTTP parser has checked it; the length bound keeps ``int`` cheap regardless)
            return int(text) if text.isascii() and text.isdigit() and len(text) <= 20 else None
    return None


async def _refuse(send: Send, status: int, message: str) -> None:
    code = "request_timeout" if status == 408 else "request_too_large"
    body = json.dumps(
        {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": code,
            }
        }
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        # The rest of the body is not read: the connection cannot carry a next request.
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

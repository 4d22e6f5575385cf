"""The HTTP connection guard: a deadline for request heads and a cap on open connections.

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
  still waiting for its head (an attacker's, most likely), or itself when every connection is
  busy with a real request. WebSockets count toward the cap but are never closed by it.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any

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


def guarded_protocol(head_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools, else h11) with a head deadline and a connection cap."""
    base: Any = AutoHTTPProtocol

    class GuardedHTTPProtocol(base):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_timer: asyncio.TimerHandle | None = None
            self._head_since = 0.0
            self._head_bytes = 0
            self._cycle_seen: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()
            if len(self.connections) > max_connections:
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

        def waiting_for_head(self) -> bool:
            return self._head_timer is not None

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_since = time.monotonic()
                self._head_timer = self.loop.call_later(head_timeout, self._head_timed_out)

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
                if isinstance(c, GuardedHTTPProtocol) and c.waiting_for_head() and c is not self
            ]
            victim = min(waiting, key=lambda c: c._head_since) if waiting else self
            victim._disarm()
            victim.transport.close()

    return GuardedHTTPProtocol

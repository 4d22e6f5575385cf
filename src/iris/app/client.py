"""The iris WebSocket connection: authenticate, read frames, reconnect with ``resume``.

No Textual here: the app hands in callbacks for frames and status lines. After a drop it waits
(0.5 s doubling to 5 s) and reconnects, then asks for everything after the last seq it applied.
It asks for the ``append`` feature (streamed text as what was added, not whole snapshots); when
the app's store finds an append that does not fit its text (``resync``), it sends ``resume``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from iris.protocol.appends import FEATURE as APPEND

UNAUTHORIZED = 4401


@dataclass(frozen=True)
class Status:
    """What the header shows about the link."""

    state: str  # connecting | connected | reconnecting | offline | unauthorized
    detail: str = ""


def no_server_help(url: str) -> str:
    return (
        f"No iris server at {url}. Start one with `iris serve` (the iris platform is on by "
        "default) and list this device's token under `platforms.iris.tokens` in "
        "~/.iris/config.yaml; then pass it with `iris app --token TOKEN` or in Settings."
    )


class IrisConnection:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        chat_id: Callable[[], str | None],
        resume_point: Callable[[], int],
        on_frame: Callable[[dict[str, Any]], None],
        on_status: Callable[[Status], None],
        resync: Callable[[], int | None] = lambda: None,
        features: tuple[str, ...] = (APPEND,),
        retry_min: float = 0.5,
        retry_max: float = 5.0,
    ) -> None:
        self.url = url
        self.token = token
        self._chat_id = chat_id
        self._resume_point = resume_point
        self._on_frame = on_frame
        self._on_status = on_status
        self._resync = resync
        self.features = features
        self._retry = (retry_min, retry_max)
        self._socket: ClientConnection | None = None
        self.connects = 0

    @property
    def connected(self) -> bool:
        return self._socket is not None

    async def send(self, frame: dict[str, Any]) -> bool:
        """Send if connected; False tells the caller it did not go out."""
        socket = self._socket
        if socket is None:
            return False
        try:
            await socket.send(json.dumps(frame))
        except ConnectionClosed:
            return False
        return True

    async def drop(self) -> None:
        """Close the current socket (the run loop reconnects)."""
        if self._socket is not None:
            await self._socket.close()

    async def run(self) -> None:
        """Connect and reconnect until cancelled or the token is refused."""
        delay = self._retry[0]
        while True:
            self._on_status(Status("reconnecting" if self.connects else "connecting", self.url))
            try:
                async with connect(self.url, open_timeout=5, max_size=2**24) as socket:
                    await self._session(socket)
            except ConnectionClosed as closed:
                if closed.rcvd is not None and closed.rcvd.code == UNAUTHORIZED:
                    self._socket = None
                    self._on_status(Status("unauthorized", _unauthorized_help()))
                    return
            except InvalidURI:
                self._on_status(Status("offline", f"not a WebSocket URL: {self.url}"))
                return
            except (OSError, TimeoutError, InvalidHandshake):
                pass
            if self._socket is not None:
                delay = self._retry[0]  # it was up: start the backoff over
            self._socket = None
            self._on_status(
                Status("reconnecting", f"connection lost; retrying in {delay:.1f} s")
                if self.connects
                else Status("offline", no_server_help(self.url))
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._retry[1])

    async def _session(self, socket: ClientConnection) -> None:
        hello: dict[str, Any] = {"type": "hello", "token": self.token}
        if self.features:
            hello["features"] = list(self.features)
        chat_id = self._chat_id()
        if chat_id:
            hello["chat_id"] = chat_id
        await socket.send(json.dumps(hello))
        # Authentication fails by closing the socket, so wait for `ready` before trusting it.
        first = json.loads(await socket.recv())
        self._socket = socket
        self.connects += 1
        self._on_frame(first)
        self._on_status(Status("connected", self.url))
        # Everything after the last seq applied: the missed part of a turn after a drop, or on a
        # fresh start (0) the chat so far — as a replay, or a `sync` if the log is trimmed.
        await socket.send(json.dumps({"type": "resume", "after_seq": self._resume_point()}))
        async for raw in socket:
            frame = json.loads(raw)
            if isinstance(frame, dict):
                self._on_frame(frame)
                after_seq = self._resync()
                if after_seq is not None:  # an append did not fit: the message comes again
                    await socket.send(json.dumps({"type": "resume", "after_seq": after_seq}))
        # A clean close from the server still means: reconnect.
        raise ConnectionClosed(None, None)


def _unauthorized_help() -> str:
    return (
        "The server refused this device's token (4401). Set it with `iris app --token TOKEN` "
        "or in Settings; the server lists accepted tokens under `platforms.iris.tokens`."
    )

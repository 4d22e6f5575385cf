"""The real server on 127.0.0.1 and devices that speak the iris protocol with ``websockets``.

Every frame a device receives is validated against the shipped JSON Schema, so every test is
also a schema test. Waits have timeouts; a hung stream fails in seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jsonschema
import pytest
import uvicorn
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from iris.config import Config
from iris.server.asgi import UVICORN_WS_OPTIONS, build_app
from iris.surfaces.socket.endpoint import SocketSurface
from tests.conftest import MakeConfig
from tests.fakes import loopback
from tests.fakes.upstream import FakeUpstream

TOKEN = "iris-device-token-t1"
WAIT = 5.0

SCHEMA: dict[str, Any] = json.loads(
    resources.files("iris.protocol").joinpath("frames.schema.json").read_text()
)
SERVER_FRAME = jsonschema.Draft202012Validator(SCHEMA)


class Device:
    """One app connection: sends frames, receives and checks them."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.frames: list[dict[str, Any]] = []

    async def send(self, frame: dict[str, Any] | str) -> None:
        await self.ws.send(frame if isinstance(frame, str) else json.dumps(frame))

    async def recv(self, within: float = WAIT) -> dict[str, Any]:
        async with asyncio.timeout(within):
            raw = await self.ws.recv()
        frame = json.loads(raw)
        SERVER_FRAME.validate(frame)
        self.frames.append(frame)
        return frame

    async def until(self, type_: str, within: float = WAIT, **fields: Any) -> list[dict[str, Any]]:
        """Frames up to and including the first of ``type_`` whose fields match."""
        got: list[dict[str, Any]] = []
        async with asyncio.timeout(within):
            while True:
                frame = await self.recv(within)
                got.append(frame)
                if frame["type"] == type_ and all(frame.get(k) == v for k, v in fields.items()):
                    return got

    async def turn(self, within: float = WAIT) -> list[dict[str, Any]]:
        """Frames up to the end of a turn (``typing {on:false}``)."""
        return await self.until("typing", within, on=False)

    async def closed(self, within: float = WAIT) -> int | None:
        """Wait for the server to close; the close code. Frames before it are kept."""
        async with asyncio.timeout(within):
            with contextlib.suppress(ConnectionClosed):
                while True:
                    frame = json.loads(await self.ws.recv())
                    self.frames.append(frame)
        return self.ws.close_code

    @property
    def max_seq(self) -> int:
        return max((f["seq"] for f in self.frames), default=0)

    async def close(self) -> None:
        await self.ws.close()


@dataclass
class IrisServer:
    config: Config
    url: str
    surface: SocketSurface
    uvicorn: uvicorn.Server
    devices: list[Device] = field(default_factory=list[Device])
    stopped: bool = False

    async def stop(self) -> None:
        """Shut the server down as ``iris serve`` does on SIGTERM (devices see 1012)."""
        if not self.stopped:
            self.stopped = True
            await loopback.stop(self.uvicorn)

    async def connect(
        self,
        token: str | None = TOKEN,
        *,
        chat_id: str | None = None,
        after_seq: int | None = None,
        header: bool = False,
        ready: bool = True,
        receive_buffer: int | None = None,
        features: list[str] | None = None,
    ) -> Device:
        """A device; with ``ready`` it authenticated and its ``ready`` frame was read.

        ``receive_buffer`` shrinks its socket's kernel buffer, and turns compression off, so a
        device that stops reading pushes back on the server after kilobytes, not megabytes.
        ``features`` go in the ``hello`` (with ``header``, in the ``features`` query parameter)."""
        headers = {"Authorization": f"Bearer {token}"} if header and token is not None else None
        sock = None
        if receive_buffer is not None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            sock.setblocking(False)
            port = int(self.url.split(":")[2].split("/")[0])
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        url = self.url
        if header and features is not None:
            url += "?features=" + ",".join(features)
        ws = await connect(
            url,
            additional_headers=headers,
            open_timeout=WAIT,
            sock=sock,
            compression=None if receive_buffer is not None else "deflate",
        )
        device = Device(ws)
        self.devices.append(device)
        if not header and token is not None:
            hello: dict[str, Any] = {"type": "hello", "token": token}
            if chat_id is not None:
                hello["chat_id"] = chat_id
            if after_seq is not None:
                hello["after_seq"] = after_seq
            if features is not None:
                hello["features"] = features
            await device.send(hello)
        if ready:
            frame = await device.recv()
            assert frame["type"] == "ready", frame
        return device


StartServer = Callable[..., Awaitable[IrisServer]]


@pytest.fixture
async def iris_server(
    make_config: MakeConfig, upstream: FakeUpstream
) -> AsyncIterator[StartServer]:
    """``await iris_server(**config_sections)``: ``iris serve``'s app on a free port."""
    running: list[IrisServer] = []

    async def start(**sections: Any) -> IrisServer:
        platforms = {"iris": {"tokens": [TOKEN]}, "api_server": {"enabled": False}}
        platforms["iris"].update(sections.pop("iris", {}))
        platforms.update(sections.pop("platforms", {}))  # the API, Home Assistant...
        if "a2a" in sections:  # the A2A server (tests/socket/test_a2a_server.py)
            platforms["a2a"] = sections.pop("a2a")
        config = make_config(upstream.base_url, platforms=platforms, **sections)
        app = build_app(config)
        sock = loopback.bind()
        server = await loopback.start(app, sock, **UVICORN_WS_OPTIONS)
        port = sock.getsockname()[1]
        surface = next(s for s in _surfaces(app) if isinstance(s, SocketSurface))
        handle = IrisServer(config, f"ws://127.0.0.1:{port}/iris/ws", surface, server)
        running.append(handle)
        return handle

    yield start
    for handle in running:
        for device in handle.devices:
            with contextlib.suppress(Exception):
                await device.close()
        await handle.stop()
    upstream.assert_used_up()


def _surfaces(app: Any) -> list[Any]:
    # build_app keeps the runtime on app.state; the surface owns the route's endpoint.
    for route in app.routes:
        endpoint = getattr(route, "endpoint", None)
        owner = getattr(endpoint, "__self__", None)
        if owner is not None:
            return [owner]
    return []

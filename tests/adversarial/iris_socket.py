"""A device on the iris socket of a real iris serve, for the adversarial socket tests."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from tests.fakes.served import Served

TOKEN = "adversary-token-0123"


IRIS = {"platforms": {"iris": {"enabled": True, "tokens": [TOKEN]}}}


WAIT = 10.0


_open: list[ClientConnection] = []


async def device(
    base: str, *, query: str = "", hello: bool = True, receive_buffer: int | None = None
) -> ClientConnection:
    """A device on ``iris serve``; with ``hello`` it authenticated and read ``ready``.

    ``receive_buffer`` shrinks its socket's kernel buffer so that a device that stops reading
    pushes back on the server after kilobytes."""
    sock = None
    if receive_buffer is not None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.setblocking(False)
        port = int(base.rsplit(":", 1)[1])
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    url = base.replace("http://", "ws://") + "/iris/ws" + query
    ws = await connect(url, open_timeout=WAIT, sock=sock, compression=None, max_size=None)
    _open.append(ws)
    if hello:
        await ws.send(json.dumps({"type": "hello", "token": TOKEN}))
        assert json.loads(await ws.recv())["type"] == "ready"
    return ws


async def recv(ws: ClientConnection) -> dict[str, Any]:
    async with asyncio.timeout(WAIT):
        return json.loads(await ws.recv())


def assert_no_traceback(server: Served) -> None:
    log = "".join(server.drain())
    assert "Traceback" not in log, log

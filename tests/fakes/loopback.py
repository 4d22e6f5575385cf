"""Serve an ASGI app with uvicorn on a free 127.0.0.1 port inside a running event loop.

Shared by the fake upstream, the API tests and the iris socket tests. uvicorn's own shutdown
sleeps and polls in 0.1 s steps; tests start and stop a server each, so ``stop`` closes the
same things but polls fast.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn


def bind() -> socket.socket:
    """A listening socket on a free loopback port (clients may connect before serving starts:
    the backlog holds them)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


async def start(app: Any, sock: socket.socket, **options: Any) -> uvicorn.Server:
    """Start serving ``app`` on ``sock`` (lifespan included unless ``lifespan="off"``)."""
    config = uvicorn.Config(app, log_config=None, access_log=False, loop="none", **options)
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[sock])
    return server


async def stop(server: uvicorn.Server) -> None:
    for listener in server.servers:
        listener.close()
    state = server.server_state
    for connection in list(state.connections):
        connection.shutdown()
    for _ in range(400):
        if not state.connections and not state.tasks:
            break
        await asyncio.sleep(0.005)
    for task in list(state.tasks):
        task.cancel()
    for listener in server.servers:
        await listener.wait_closed()
    await server.lifespan.shutdown()

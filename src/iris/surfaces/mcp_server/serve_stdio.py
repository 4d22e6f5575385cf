"""``iris mcp serve``: MCP server mode on stdin/stdout, for an assistant that launches Iris itself.

The caller is the local user (who can read the config and the store already): no token is
asked, and approvals it answers are ``by`` ``local``. The process runs the iris chats as
``iris serve`` does (the same store, the same rooms and frame log; with ``store.url`` the turns
and devices of every server process), without the server's other surfaces: no port is opened
and no chat platform is polled. Stdout carries the protocol alone; logs go to stderr.
"""

from __future__ import annotations

import asyncio
import logging

from iris.config import Config
from iris.runtime import Runtime
from iris.surfaces.mcp_server.chat_tools import build_server
from iris.surfaces.mcp_server.desk import ChatDesk
from iris.surfaces.socket.endpoint import SocketSurface


def run_stdio(config: Config) -> int:
    logging.basicConfig(level=logging.WARNING)  # stderr: stdout is the protocol's
    asyncio.run(serve_stdio(config))
    return 0


async def serve_stdio(config: Config) -> None:
    runtime = Runtime.create(config)
    iris = SocketSurface(runtime)
    runtime.agent.prepare()
    try:
        await runtime.agent.start_tools()
        await iris.start()
        try:
            await build_server(ChatDesk(iris)).run_stdio_async()
        finally:
            await iris.stop()
    finally:
        await runtime.agent.aclose()
        if runtime.shared is not None:
            await runtime.shared.aclose()

"""An MCP server that pushes Iris's limits, written with the official ``mcp`` SDK's server API
(``MCPServer``), for the third pass's MCP findings. ``python -m tests.fakes.mcp_hostile MODE
[N]`` over stdio, or ``… http PORTFILE MODE [N]`` over Streamable HTTP. Modes:

- ``many N``: lists ``N`` tools ``t0``… besides its own (finding 6: 10 002 tools, 22 MB).
- ``schema``: adds a tool ``fat`` whose input schema is ~40 KB.
- ``crash``: writes 3 KB to stderr and exits right after each tools/list (finding 7).
- ``collide``: adds the tools ``a.b`` and ``a_b`` (one function name once ``.`` is ``_``),
  each answering with its own name (finding 10).
- any mode: the tools ``big(mb)`` (a text result of ``mb`` MB) and ``echo(text)``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import Tool as MCPTool

ARGS = [a for a in sys.argv[1:] if a != "http"]
HTTP = sys.argv[1:2] == ["http"]
PORT_FILE = ARGS.pop(0) if HTTP else ""
MODE = ARGS[0] if ARGS else ""
COUNT = int(ARGS[1]) if len(ARGS) > 1 else 0


class Hostile(MCPServer):
    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        if MODE == "many":
            empty: dict[str, Any] = {"type": "object", "properties": {}}
            tools += [
                MCPTool(name=f"t{i}", description="x", input_schema=empty) for i in range(COUNT)
            ]
        elif MODE == "schema":
            properties = {
                f"field_{i}": {"type": "string", "description": "d" * 30} for i in range(800)
            }
            tools.append(
                MCPTool(
                    name="fat",
                    description="fat",
                    input_schema={"type": "object", "properties": properties},
                )
            )
        elif MODE == "crash":
            sys.stderr.write("x" * 3000 + "\nfatal: crashed after listing\n")
            sys.stderr.flush()
            asyncio.get_running_loop().call_later(0.05, os._exit, 3)
        return tools


server = Hostile("iris-hostile")


@server.tool()
def big(mb: float = 50.0) -> str:
    """A text result of mb megabytes."""
    return "y" * int(mb * 1_000_000)


@server.tool()
def echo(text: str) -> str:
    """The text back."""
    return text


if MODE == "collide":
    server.add_tool(lambda: "I am a.b", name="a.b", description="a dot b")
    server.add_tool(lambda: "I am a_b", name="a_b", description="a underscore b")


def _serve_http(port_file: str) -> None:
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    Path(port_file).write_text(str(sock.getsockname()[1]))
    uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="warning")).run(
        sockets=[sock]
    )


if __name__ == "__main__":
    if HTTP:
        _serve_http(PORT_FILE)
    else:
        server.run()

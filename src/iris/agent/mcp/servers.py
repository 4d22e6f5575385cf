"""Every MCP server one agent uses: their connections' tasks, and their tools in the agent's
``ToolRegistry`` (added when a server lists them, replaced on ``tools/list_changed``, gone
while it is down).

``start`` begins every enabled server at once and waits until each has connected or failed
once, bounded by the longest ``connect_timeout``; a server still down then keeps retrying in
the background and its tools appear when it comes up. ``aclose`` stops them all.

What a server may offer is capped (``tools.mcp``): a tool whose input schema is over
``max_schema_bytes`` is dropped, and past ``max_tools_per_server`` of one server or
``max_tools`` in all (the built-ins counted) the rest are; each kind of drop is logged once
per server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from iris.agent.mcp import SignInFailed
from iris.agent.mcp.connection import Confined, McpConnection, Note
from iris.agent.mcp.naming import chosen, tool_name, tool_names
from iris.agent.mcp.oauth import auth_dir
from iris.agent.mcp.results import parameters
from iris.agent.mcp.sampling import Sampler
from iris.agent.mcp.signin import SignIns
from iris.agent.sandbox import Unavailable, Workspaces, prepare
from iris.agent.tools import Tool, ToolRegistry, ToolResult
from iris.config import Config, McpServerConfig
from iris.llm.provider import Provider
from iris.tasks import Supervisor

if TYPE_CHECKING:
    import mcp_types as types

log = logging.getLogger(__name__)

STOP_WAIT = 8.0  # seconds the servers get to stop (a stdio child: stdin closed, then killed)
MAX_DESCRIPTION = 2000


class McpServers:
    def __init__(
        self,
        config: Config,
        registry: ToolRegistry,
        private: Sequence[Path] = (),
        model: Callable[[], tuple[Provider, str]] | None = None,
    ) -> None:
        self._config = config
        self._registry = registry
        self.auth_dir = auth_dir(config.store.resolved_path().parent)
        self.sign_ins = SignIns(self.auth_dir)  # those the web app started
        self.connections = {
            name: McpConnection(
                name,
                server,
                terminal_env=config.tools.terminal.env,
                output_limit=config.tools.terminal.output_limit,
                on_change=self._changed,
                max_result_bytes=config.tools.mcp.max_result_bytes,
                sandbox=_sandbox(config, name, server, private) if server.sandbox else None,
                sampler=Sampler(name, server.sampling, model),
                auth_dir=self.auth_dir if server.auth == "oauth" else None,
            )
            for name, server in config.mcp_servers.items()
            if server.enabled
        }
        self._offered: dict[str, list[str]] = {}  # server → its tools' names in the registry
        self._tasks = Supervisor()  # each connection's run, from start to aclose
        self._started = False
        self._change = asyncio.Event()  # set (and replaced) whenever a server changed

    async def start(self) -> None:
        """Start every server; return once each connected or failed once (bounded)."""
        if self._started or not self.connections:
            return
        self._started = True
        for name, connection in self.connections.items():
            self._tasks.create_task(connection.run(), name=f"mcp {name}")
        bound = max(c.config.connect_timeout for c in self.connections.values()) + 1.0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(bound):
                for connection in self.connections.values():
                    await connection.attempted.wait()

    async def aclose(self) -> None:
        self._started = False
        for connection in self.connections.values():
            connection.stop()
        await self.sign_ins.aclose()
        await self._tasks.close(STOP_WAIT)

    async def sign_in_link(self, name: str, redirect_uri: str) -> str:
        """Start a sign-in to server ``name`` whose redirect comes to ``redirect_uri``: the
        link for the person (raises ``SignInFailed``); once signed in, the server connects."""
        connection = self.connections.get(name)
        if connection is None or connection.tokens is None:
            oauth = [n for n, c in self.connections.items() if c.tokens is not None]
            raise SignInFailed(
                f"no enabled MCP server {name!r} with auth: oauth"
                + (f" (those with it: {', '.join(oauth)})" if oauth else "")
            )

        async def connected() -> None:
            connection.retry_now()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(connection.config.connect_timeout + 1.0):
                    await self.wait_until(lambda: connection.state != "starting")

        return await self.sign_ins.start(name, connection.config, redirect_uri, connected)

    async def wait_until(self, ready: Callable[[], bool]) -> None:
        """Until ``ready()`` holds, checked after each change of a server (state, tools)."""
        while not ready():
            await self._change.wait()

    def lines(self) -> list[str]:
        """One line per configured server, for ``/status`` and ``/tools``."""
        lines: list[str] = []
        for name, server in self._config.mcp_servers.items():
            connection = self.connections.get(name)
            if connection is None or not server.enabled:
                lines.append(f"mcp {name}: disabled")
            elif connection.state == "connected":
                names = self._offered.get(name, [])
                lines.append(f"mcp {name}: connected, {len(names)} tools: {', '.join(names)}")
            elif connection.state == "down":
                lines.append(f"mcp {name}: unavailable ({connection.error}); retrying")
            elif connection.state == "signin":
                lines.append(f"mcp {name}: {connection.error}")
            else:
                lines.append(f"mcp {name}: {connection.state}")
        return lines

    def _changed(self, connection: McpConnection) -> None:
        """The server's listing changed (or it went down): replace its tools in the registry."""
        for name in self._offered.pop(connection.name, []):
            self._registry.remove(name)
        limits = self._config.tools.mcp
        room = min(limits.max_tools_per_server, limits.max_tools - len(self._registry.names()))
        offered: list[str] = []
        names = tool_names(connection.name, [tool.name for tool in connection.tools])
        for tool in connection.tools:
            name = names[tool.name]
            if not self._offerable(connection, tool, name):
                continue
            if len(offered) >= room:
                connection.once(
                    "tools",
                    "MCP server %s lists more tools than fit tools.mcp.max_tools_per_server "
                    "(%d) or max_tools (%d in all): %r and the rest are not offered (logged "
                    "once)",
                    connection.name,
                    limits.max_tools_per_server,
                    limits.max_tools,
                    tool.name,
                )
                break
            description = (tool.description or tool.title or tool.name)[:MAX_DESCRIPTION]
            run = _runner(connection, tool.name)
            # Every progress notification is shown (the connection bounds them per call).
            where = _where(connection)
            schema = parameters(tool.input_schema)
            self._registry.add(
                Tool(
                    name,
                    description,
                    schema,
                    run,
                    progress_every=0.0,
                    where=where,
                    server=connection.name,
                    remote=tool.name,
                )
            )
            offered.append(name)
        offered += self._resource_tools(connection, room - len(offered))
        self._offered[connection.name] = offered
        self._change.set()
        self._change = asyncio.Event()

    def _offerable(self, connection: McpConnection, tool: types.Tool, name: str) -> bool:
        """Is the server's ``tool`` (as ``name``) offered: chosen by the config, not a name
        taken already, its input schema within ``tools.mcp.max_schema_bytes``."""
        server, enabled = connection.config, self._config.tools.enabled
        servers = list(self._config.mcp_servers)
        include, exclude = server.include, server.exclude
        if not chosen(connection.name, tool.name, include, exclude, enabled, servers):
            return False
        if self._registry.get(name) is not None:
            log.warning("MCP server %s: tool %r is offered already; skipped", connection.name, name)
            return False
        size = len(json.dumps(tool.input_schema, ensure_ascii=False).encode())
        most = self._config.tools.mcp.max_schema_bytes
        if size > most:
            connection.once(
                "schema",
                "MCP server %s: tool %r has an input schema of %d bytes, over "
                "tools.mcp.max_schema_bytes (%d): not offered (logged once)",
                connection.name,
                tool.name,
                size,
                most,
            )
            return False
        return True

    def _resource_tools(self, connection: McpConnection, room: int) -> list[str]:
        """``mcp_<server>_resources_list`` / ``_read`` for a server that offers resources
        (chosen as its tools are, unless a tool of its own has the name already, and within
        the ``room`` its tools left under the caps)."""
        if not connection.has_resources or room <= 0:
            return []
        server = connection.name
        added: list[str] = []
        config, servers = connection.config, list(self._config.mcp_servers)
        enabled = self._config.tools.enabled
        for tool in _resource_tools(connection):
            if len(added) >= room:
                break  # the caps hold for these as for the server's own tools
            own = tool.name.removeprefix(f"mcp_{server}_")
            if not chosen(server, own, config.include, config.exclude, enabled, servers):
                continue  # include / exclude / tools.enabled choose these as the server's own
            if self._registry.get(tool.name) is None:
                self._registry.add(replace(tool, where=_where(connection), server=server))
                added.append(tool.name)
        return added


def _resource_tools(connection: McpConnection) -> list[Tool]:
    server = connection.name

    async def listed(_args: dict[str, Any], _progress: Note) -> ToolResult:
        return await connection.resources()

    async def read(args: dict[str, Any], _progress: Note) -> ToolResult:
        return await connection.read(str(args.get("uri", "")))

    uri = {"type": "string", "description": "The resource's URI, as the list gives it"}
    return [
        Tool(
            tool_name(server, "resources_list"),
            f"List the resources (files, records, documents) the MCP server {server} offers.",
            {"type": "object", "properties": {}},
            listed,
            remote="resources/list",
        ),
        Tool(
            tool_name(server, "resources_read"),
            f"Read one resource of the MCP server {server} by its URI.",
            {"type": "object", "properties": {"uri": uri}, "required": ["uri"]},
            read,
            remote="resources/read",
        ),
    ]


def _sandbox(
    config: Config, name: str, server: McpServerConfig, private: Sequence[Path]
) -> Confined | str:
    """The sandbox a stdio server runs in (the terminal's hide and limits but CPU time, the
    server's binds and network, its own folder as cwd), or why it cannot run (then the
    server stays down: never on the host instead)."""
    data_dir = config.store.resolved_path().parent
    terminal = config.tools.terminal
    root = Path(terminal.workspace).expanduser() if terminal.workspace else data_dir / "workspace"
    settings = terminal.model_copy(update={"binds": server.binds, "network": server.network})
    try:
        sandbox = prepare(settings, private=[*private, data_dir])
    except Unavailable as exc:
        log.warning("MCP server %s is not started: its sandbox cannot run (%s)", name, exc)
        return f"its sandbox cannot run: {exc}"
    return Confined(replace(sandbox, cpu_limit=False), root / f"mcp-{name}", data_dir)


def _where(connection: McpConnection) -> Callable[[str], str]:
    config, sandbox = connection.config, connection.sandbox
    if config.url is not None:
        text = f"by the MCP server {connection.name} at {urlsplit(config.url).netloc}"
    elif isinstance(sandbox, Confined):
        shown = Workspaces(sandbox.folder, "shared").shown("")
        text = f"by the MCP server {connection.name}, {sandbox.sandbox.describe(shown)}"
    else:
        text = f"by the MCP server {connection.name}, on the host"
    return lambda _chat: text


def _runner(connection: McpConnection, tool: str) -> Any:
    async def run(args: dict[str, Any], progress: Note) -> ToolResult:
        return await connection.call(tool, args, progress)

    return run

"""The agent's own tools: a registry of JSON-schema tools and the built-ins.

Built-ins: ``terminal`` (``{"command": str}``, runs in the sandbox of ``sandbox.py`` — the
conversation's workspace as its cwd — or, with ``tools.terminal.sandbox: none``, on the host in
``tools.terminal.cwd``; with ``tools.terminal.timeout`` and only the ``tools.terminal.env``
variables, output capped) and ``read_file`` (``{"path": str}``, regular files inside
``tools.read_file.roots``, see ``reach.py``).

A tool's ``where`` says how a call of it runs for a chat ("in the sandbox: workspace …, no
network", "on the host"): the person approving it reads it. ``CALL_CHAT`` is the chat whose
turn runs the call (the terminal's workspace is the chat's).
A tool returns text for the model; a failure is text too (``ok=False``), never an exception
out of the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iris.agent.reach import FileReach, Refused, command_env
from iris.agent.sandbox import UID, Sandbox, Unavailable, Workspaces, prepare, start
from iris.config import ToolsConfig
from iris.private import iris_home

log = logging.getLogger(__name__)

Progress = Callable[[str], None]
CALL_CHAT: ContextVar[str] = ContextVar("CALL_CHAT", default="")


@dataclass(frozen=True, slots=True)
class ToolResult:
    ok: bool
    output: str


ToolFn = Callable[[dict[str, Any], Progress], Awaitable[ToolResult]]
PROGRESS_EVERY = 0.25  # seconds between two progress notes of a call that are shown


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema of the arguments object
    run: ToolFn
    # A note sooner than this after the last one shown is dropped (0: every note is shown).
    progress_every: float = PROGRESS_EVERY
    # How a call runs, for a chat id: the line the person approving it reads (None: no line).
    where: Callable[[str], str] | None = None
    # Where the tool lives, for API clients (``mcp_call.server_label`` / ``name``): an MCP
    # server's name and the tool's own name there; "" for the built-ins.
    server: str = ""
    remote: str = ""

    def schema(self) -> dict[str, Any]:
        """The OpenAI chat-format function tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class ToolRegistry:
    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {tool.name: tool for tool in tools or []}
        # Lines for /status and /tools about the built-ins (how the terminal runs, or why not).
        self.notes: list[str] = []

    def add(self, tool: Tool) -> None:
        self._tools[tool.name] = tool

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self, *, exclude: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
        return [tool.schema() for name, tool in self._tools.items() if name not in exclude]


def validate_args(schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    """A small JSON-schema check (required keys and primitive types): an error or None."""
    for key in schema.get("required", []):
        if key not in args:
            return f"missing required argument '{key}'"
    types = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict}
    for key, spec in schema.get("properties", {}).items():
        expected = types.get(spec.get("type", ""))
        if key in args and expected is not None and not isinstance(args[key], expected):
            return f"argument '{key}' must be a {spec['type']}"
    return None


def cap(text: str, limit: int) -> str:
    """Keep the head and the tail of a long output: the end of a command's output matters most."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    return f"{text[:head]}\n… [{len(text) - limit} characters cut] …\n{text[-tail:]}"


def builtin_tools(
    config: ToolsConfig, *, private: Sequence[Path] = (), data_dir: Path | None = None
) -> ToolRegistry:
    """The enabled built-ins; ``private`` are files read_file refuses even inside a root
    (Iris's config and database) and the sandbox never shows; ``data_dir`` (default
    ``~/.iris``) holds the terminal's default workspace."""
    registry = ToolRegistry()
    if "terminal" in config.enabled:
        terminal, note = _terminal(config, private, data_dir or iris_home())
        if terminal is not None:
            registry.add(terminal)
        registry.notes.append(note)
    if "read_file" in config.enabled:
        registry.add(_read_file_tool(config, private))
    return registry


def _terminal(
    config: ToolsConfig, private: Sequence[Path], data_dir: Path
) -> tuple[Tool | None, str]:
    """The terminal tool (None: not offered, logged once at start) and its line for /status."""
    settings = config.terminal
    if settings.sandbox == "none":
        log.warning(
            "tools.terminal.sandbox is none: terminal commands run on the host and reach all "
            "that the iris process can (its config, its store, the network)"
        )
        tool = _terminal_tool(config, None, None)
        return tool, f"terminal: runs on the host, in {settings.cwd}"
    root = Path(settings.workspace).expanduser() if settings.workspace else data_dir / "workspace"
    try:
        for own in private:
            if Path(os.path.realpath(own.expanduser())).is_relative_to(os.path.realpath(root)):
                raise Unavailable(f"tools.terminal.workspace {root} holds Iris's own {own}")
        sandbox = prepare(settings, private=[*private, data_dir])
    except Unavailable as exc:
        log.warning(
            "the terminal tool is not offered: %s. Set tools.terminal.sandbox: none to run "
            "commands on the host instead (docs/security.md)",
            exc,
        )
        return None, f"terminal: not offered ({exc})"
    owner = UID if sandbox.setpriv is not None else None
    workspaces = Workspaces(root, settings.workspace_scope, owner)
    shown = workspaces.shown("")
    if settings.workspace_scope == "chat":  # the root, with one folder per conversation
        shown = f"{shown.rsplit('/', 1)[0]}/<chat>"
    return _terminal_tool(config, sandbox, workspaces), f"terminal: runs {sandbox.describe(shown)}"


def _terminal_tool(
    config: ToolsConfig, sandbox: Sandbox | None, workspaces: Workspaces | None
) -> Tool:
    settings = config.terminal
    cwd = Path(settings.cwd).expanduser()

    def where(chat_id: str) -> str:
        if sandbox is None or workspaces is None:
            return f"on the host, in {cwd}"
        return sandbox.describe(workspaces.shown(chat_id))

    async def run(args: dict[str, Any], progress: Progress) -> ToolResult:
        command = str(args["command"])
        env = command_env(settings.env)  # never the server's keys
        if sandbox is None or workspaces is None:
            process = await asyncio.create_subprocess_shell(
                command,
                cwd=cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                start_new_session=True,  # so a timeout kills the whole process group
            )

            async def stop() -> None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()

            def close() -> None:
                pass
        else:
            workspace = workspaces.open(CALL_CHAT.get())
            sandboxed = await start(
                sandbox, ["/bin/sh", "-c", command], workspace, env, lifetime=settings.timeout
            )
            process, stop, close = sandboxed.process, sandboxed.kill, sandboxed.close
        try:
            return await _finish(process, stop, settings.timeout, settings.output_limit, progress)
        finally:
            close()

    description = "Run a shell command and return its output (stdout and stderr)."
    if sandbox is not None:
        description += (
            " It runs in a sandbox whose working folder, /workspace, keeps its files between "
            "the commands of this conversation"
            + ("." if sandbox.network else "; there is no network.")
        )
    return Tool(
        name="terminal",
        description=description,
        parameters=_one_string("command", "the shell command"),
        run=run,
        where=where,
    )


async def _finish(
    process: asyncio.subprocess.Process,
    stop: Callable[[], Awaitable[None]],
    seconds: float,
    output_limit: int,
    progress: Progress,
) -> ToolResult:
    """Read a command's output to its end, or ``stop`` it (all of it) after ``seconds``."""
    chunks: list[bytes] = []

    async def read() -> None:
        assert process.stdout is not None
        while line := await process.stdout.readline():
            chunks.append(line)
            progress(line.decode(errors="replace").rstrip()[:200])

    try:
        await asyncio.wait_for(read(), timeout=seconds)
        code = await process.wait()
    except (TimeoutError, asyncio.CancelledError) as exc:
        await stop()
        if isinstance(exc, asyncio.CancelledError):
            raise
        output = b"".join(chunks).decode(errors="replace")
        return ToolResult(False, cap(output, output_limit) + f"\n[timed out after {seconds:g} s]")
    output = cap(b"".join(chunks).decode(errors="replace"), output_limit)
    if code != 0:
        return ToolResult(False, f"{output}\n[exit code {code}]")
    return ToolResult(True, output)


def _read_file_tool(config: ToolsConfig, private: Sequence[Path]) -> Tool:
    limit = config.read_file.max_bytes
    base = Path(config.terminal.cwd).expanduser()
    roots = [Path(root) for root in config.read_file.roots] or [base]
    reach = FileReach(base, roots, private)

    async def run(args: dict[str, Any], progress: Progress) -> ToolResult:
        name = str(args["path"])
        try:
            data = await asyncio.to_thread(reach.read_head, name, limit + 1)
        except Refused as exc:
            return ToolResult(False, f"error: cannot read {name}: {exc}")
        except OSError as exc:
            return ToolResult(False, f"cannot read {name}: {exc.strerror or exc}")
        text = data[:limit].decode(errors="replace")
        if len(data) > limit:
            text += f"\n[truncated at {limit} bytes]"
        return ToolResult(True, text)

    return Tool(
        name="read_file",
        description="Read a text file and return its content.",
        parameters=_one_string("path", "the file path"),
        run=run,
    )


def _one_string(name: str, description: str) -> dict[str, Any]:
    """The JSON Schema of an arguments object with one required string."""
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name],
    }

"""The agent's own tools: a registry of JSON-schema tools and the built-ins.

Built-ins: ``terminal`` (``{"command": str}``, runs in ``tools.terminal.cwd`` with
``tools.terminal.timeout`` and only the ``tools.terminal.env`` variables, output capped) and
``read_file`` (``{"path": str}``, regular files inside ``tools.read_file.roots``, see
``reach.py``).
A tool returns text for the model; a failure is text too (``ok=False``), never an exception
out of the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iris.agent.reach import FileReach, Refused, command_env
from iris.config import ToolsConfig

Progress = Callable[[str], None]


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


def builtin_tools(config: ToolsConfig, *, private: Sequence[Path] = ()) -> ToolRegistry:
    """The enabled built-ins; ``private`` are files read_file refuses even inside a root
    (Iris's config and database)."""
    registry = ToolRegistry()
    if "terminal" in config.enabled:
        registry.add(_terminal_tool(config))
    if "read_file" in config.enabled:
        registry.add(_read_file_tool(config, private))
    return registry


def _terminal_tool(config: ToolsConfig) -> Tool:
    settings = config.terminal
    cwd = Path(settings.cwd).expanduser()

    async def run(args: dict[str, Any], progress: Progress) -> ToolResult:
        command = str(args["command"])
        process = await asyncio.create_subprocess_shell(
            command,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=command_env(settings.env),  # never the server's keys
            start_new_session=True,  # so a timeout kills the whole process group
        )
        chunks: list[bytes] = []

        async def read() -> None:
            assert process.stdout is not None
            while line := await process.stdout.readline():
                chunks.append(line)
                progress(line.decode(errors="replace").rstrip()[:200])

        try:
            await asyncio.wait_for(read(), timeout=settings.timeout)
            code = await process.wait()
        except (TimeoutError, asyncio.CancelledError) as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
            if isinstance(exc, asyncio.CancelledError):
                raise
            output = b"".join(chunks).decode(errors="replace")
            return ToolResult(
                False,
                cap(output, settings.output_limit) + f"\n[timed out after {settings.timeout:g} s]",
            )
        output = cap(b"".join(chunks).decode(errors="replace"), settings.output_limit)
        if code != 0:
            return ToolResult(False, f"{output}\n[exit code {code}]")
        return ToolResult(True, output)

    return Tool(
        name="terminal",
        description="Run a shell command and return its output (stdout and stderr).",
        parameters=_one_string("command", "the shell command"),
        run=run,
    )


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

"""The terminal chat's slash commands and the per-session settings they change (pure: no I/O).

The grammar is every chat's (``iris.surfaces.commands``): only a first word of lowercase
letters after one slash is a command, so a message that starts with a path
(``/etc/hosts looks odd``) is sent to the model as written. Besides the chat commands the REPL
has ``/stream``, ``/tools``, ``/attach`` and ``/quit``; ``/compact``, ``/status``, the list of
``/tools``, ``/attach`` (which reads a file) and the schedule commands (``/remind`` and the
rest, answered by ``iris.surfaces.schedule_commands``) come back as actions the chat carries out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from iris.config import Config, ToolProgressMode
from iris.surfaces.commands import ALIASES, CHAT_COMMANDS, split

Action = Literal["continue", "new", "quit", "compact", "status", "tools", "attach", "schedule"]

_TOOL_MODES: dict[str, ToolProgressMode] = {m: m for m in ("off", "new", "all", "verbose")}


@dataclass
class ChatSettings:
    """What the next turn asks for and how it is shown; starts from the config."""

    model: str
    streaming: bool
    show_reasoning: bool
    tool_progress: ToolProgressMode

    @classmethod
    def from_config(cls, config: Config, model: str) -> ChatSettings:
        display = config.display_for("cli")
        return cls(
            model=model,
            streaming=config.streams("cli"),
            show_reasoning=display.show_reasoning,
            tool_progress=display.tool_progress,
        )


@dataclass(frozen=True, slots=True)
class CommandResult:
    text: str  # what to tell the user
    action: Action = "continue"
    arg: str = ""  # what the action works on (``/attach``'s path)


def is_command(line: str) -> bool:
    return split(line) is not None


def run_command(line: str, settings: ChatSettings) -> CommandResult:
    """Apply one slash command to ``settings``; the result says what to print and do next."""
    parts = split(line)
    assert parts is not None, "run_command needs is_command(line)"
    name, arg = parts
    command = _COMMANDS.get(_ALIASES.get(name, name))
    if command is None:
        return CommandResult(f"unknown command /{name}; /help lists the commands")
    return command.run(settings, arg)


def _on_off(arg: str, current: bool) -> bool | None:
    """What ``/<switch> on|off`` sets: ``current`` without an argument, None for a bad one."""
    if not arg:
        return current
    return {"on": True, "off": False}.get(arg.lower())


def _new(settings: ChatSettings, arg: str) -> CommandResult:
    return CommandResult("new conversation: the history is cleared", "new")


def _model(settings: ChatSettings, arg: str) -> CommandResult:
    if not arg:
        return CommandResult(f"model: {settings.model}")
    settings.model = arg
    return CommandResult(f"model: {arg} (from the next message)")


def _stream(settings: ChatSettings, arg: str) -> CommandResult:
    value = _on_off(arg, settings.streaming)
    if value is None:
        return CommandResult("usage: /stream on|off")
    settings.streaming = value
    state = "on: replies appear as they are written" if settings.streaming else "off"
    return CommandResult(f"streaming {state}")


def _reasoning(settings: ChatSettings, arg: str) -> CommandResult:
    value = _on_off(arg, settings.show_reasoning)
    if value is None:
        return CommandResult("usage: /reasoning on|off")
    settings.show_reasoning = value
    return CommandResult(f"reasoning {'shown' if settings.show_reasoning else 'hidden'}")


def _tools(settings: ChatSettings, arg: str) -> CommandResult:
    if not arg:  # the tools and MCP servers: the chat asks the agent
        return CommandResult(f"tool activity: {settings.tool_progress}", "tools")
    mode = _TOOL_MODES.get(arg.lower())
    if mode is None:
        return CommandResult(f"usage: /tools [{'|'.join(_TOOL_MODES)}]")
    settings.tool_progress = mode
    return CommandResult(f"tool activity: {settings.tool_progress}")


def _help(settings: ChatSettings, arg: str) -> CommandResult:
    width = max(len(c.usage) for c in _COMMANDS.values())
    lines = [f"  {c.usage.ljust(width)}  {c.summary}" for c in _COMMANDS.values()]
    keys = [
        "  Enter sends; Alt-Enter (or a line ending in \\) adds a new line",
        "  Ctrl-C stops a reply; at an empty prompt Ctrl-C or Ctrl-D quits",
    ]
    return CommandResult("\n".join(["commands:", *lines, "keys:", *keys]))


def _attach(settings: ChatSettings, arg: str) -> CommandResult:
    return CommandResult("", "attach", arg)


def _quit(settings: ChatSettings, arg: str) -> CommandResult:
    return CommandResult("", "quit")


def _stop(settings: ChatSettings, arg: str) -> CommandResult:
    # A command is read only when no reply runs; Ctrl-C stops one while it is written.
    return CommandResult("nothing to stop (Ctrl-C stops a reply while it is written)")


def _compact(settings: ChatSettings, arg: str) -> CommandResult:
    return CommandResult("", "compact")


def _status(settings: ChatSettings, arg: str) -> CommandResult:
    return CommandResult("", "status")


def _schedule(settings: ChatSettings, arg: str) -> CommandResult:
    return CommandResult("", "schedule", arg)  # answered by the chat (its store and clock)


@dataclass(frozen=True, slots=True)
class _Command:
    usage: str
    summary: str
    run: Callable[[ChatSettings, str], CommandResult]


_COMMANDS: dict[str, _Command] = {
    "new": _Command("/new", "start a new conversation", _new),
    "stop": _Command("/stop", "(Ctrl-C) stop the reply being written", _stop),
    "model": _Command("/model [NAME]", "show or change the model", _model),
    "stream": _Command("/stream on|off", "stream replies as they are written", _stream),
    "reasoning": _Command("/reasoning on|off", "show the model's reasoning", _reasoning),
    "tools": _Command(
        "/tools [off|new|all|verbose]",
        "list the tools and MCP servers, or set how much tool activity to show",
        _tools,
    ),
    "attach": _Command(
        "/attach [PATH]",
        "send a file with your next message (or paste its path alone on a line); lists them",
        _attach,
    ),
    "compact": _Command("/compact", CHAT_COMMANDS["compact"].summary, _compact),
    "status": _Command("/status", CHAT_COMMANDS["status"].summary, _status),
    **{
        name: _Command(CHAT_COMMANDS[name].usage, CHAT_COMMANDS[name].summary, _schedule)
        for name in ("remind", "every", "schedules", "unschedule", "tz")
    },
    "help": _Command("/help", "this list", _help),
    "quit": _Command("/quit", "leave (also Ctrl-D)", _quit),
}
_ALIASES = {**ALIASES, "exit": "quit", "q": "quit"}

"""The slash commands of every chat, parsed (pure: no I/O).

One grammar for all surfaces: a message whose first word is ``/`` and lowercase letters is a
command candidate (Telegram's ``/status@iris_bot`` in groups too); a message that starts with a
path (``/etc/hosts looks odd``) is not. On chat platforms and the iris socket only the words in
``CHAT_COMMANDS`` (and ``ALIASES``) are commands — any other ``/word`` goes to the model as
text. The terminal REPL adds its own (``/stream``, ``/tools``, ``/quit``) on the same grammar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_COMMAND = re.compile(r"^/([a-z]+)(?:@[A-Za-z0-9_]+)?(?:\s+(.*))?$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Command:
    name: str  # the canonical name (an alias resolved)
    arg: str  # the rest of the line, stripped


@dataclass(frozen=True, slots=True)
class Spec:
    usage: str
    summary: str


CHAT_COMMANDS: dict[str, Spec] = {
    "new": Spec("/new", "start a fresh conversation (the old one is kept)"),
    "stop": Spec("/stop", "stop the reply being written"),
    "model": Spec("/model [NAME]", "show the model, or switch to a configured one"),
    "reasoning": Spec("/reasoning on|off", "show or hide the model's reasoning"),
    "compact": Spec("/compact", "summarize the earlier conversation now"),
    "status": Spec("/status", "model, context used of the window, tokens of the last reply"),
    "prompt": Spec("/prompt [SERVER NAME [k=v]]", "list MCP servers' prompts, or run one"),
    "signin": Spec("/signin [SERVER]", "sign in to an MCP server (a link, in the web app)"),
    "remind": Spec("/remind WHEN TEXT", "run TEXT once: in 20m, at 18:30, tomorrow 9:00"),
    "every": Spec("/every RULE PROMPT", "run PROMPT on a rule: day 08:00, weekday 7:30, cron"),
    "schedules": Spec("/schedules", "this chat's schedules and their next runs"),
    "unschedule": Spec("/unschedule ID", "remove a schedule"),
    "tz": Spec("/tz [ZONE]", "show or set your time zone (Europe/Berlin)"),
    "help": Spec("/help", "this list"),
}
ALIASES = {"reset": "new", "clear": "new"}


def split(text: str) -> tuple[str, str] | None:
    """(word, argument) of a command candidate; None for ordinary text."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    return match.group(1), (match.group(2) or "").strip()


def parse(text: str, known: dict[str, Spec] = CHAT_COMMANDS) -> Command | None:
    """The command ``text`` is, or None: ordinary text, or a ``/word`` that is no command."""
    parts = split(text)
    if parts is None:
        return None
    name = ALIASES.get(parts[0], parts[0])
    return Command(name, parts[1]) if name in known else None


def help_text(specs: dict[str, Spec] = CHAT_COMMANDS) -> str:
    width = max(len(spec.usage) for spec in specs.values())
    return "\n".join(f"{spec.usage.ljust(width)}  {spec.summary}" for spec in specs.values())

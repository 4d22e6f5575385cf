"""The one-line summary of a tool call's arguments that every surface shows. Pure.

The chat's tool-progress lines, the terminal's ``⚡`` line, the iris ``tool.start`` preview and
the app's tool card all say what a call does in a few words; each surface picks only how many
characters it has room for. A hidden character is drawn as ``⟨U+XXXX⟩`` (``visible``): a
tool line never says less than the call does.
"""

from __future__ import annotations

import json
from typing import Any

from iris.formats import visible

# The arguments that say what a call does, most telling first.
_KEYS = ("command", "path", "query", "url", "file", "pattern")


def summarize(args: dict[str, Any], limit: int) -> str:
    """The telling argument on one line, at most ``limit`` characters; ``""`` without arguments.

    The first of the usual keys that holds a string, else the first string argument, else all
    the arguments as JSON."""
    value = next((args[key] for key in _KEYS if isinstance(args.get(key), str)), None)
    if value is None:
        value = next((v for v in args.values() if isinstance(v, str)), None)
    if value is None:
        value = json.dumps(args, ensure_ascii=False) if args else ""
    return clip(value, limit)


def clip(text: str, limit: int) -> str:
    """``text`` on one line (runs of white space become one space; hidden characters drawn as
    ``⟨U+XXXX⟩``), cut to ``limit`` with ``…``."""
    text = " ".join(visible.shown(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"

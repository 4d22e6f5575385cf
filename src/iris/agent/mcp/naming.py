"""How an MCP server's tools are named and chosen for the model (pure).

A tool ``search`` of the server ``web`` is offered as ``mcp_web_search`` (characters a function
name may not hold become ``_``; at most 64 characters). The server's ``include`` / ``exclude``
(its own tool names, globs allowed) choose first; then ``tools.enabled``: when it names tools of
this server (``mcp_web_search``, ``mcp_web_*``) only those are offered, else all that passed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64  # OpenAI's limit on a function name


def tool_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``."""
    return f"mcp_{server}_{_NOT_IN_NAME.sub('_', tool)}"[:MAX_NAME]


def chosen(
    server: str,
    tool: str,
    include: Sequence[str],
    exclude: Sequence[str],
    enabled: Sequence[str],
    servers: Iterable[str],
) -> bool:
    """Is ``tool`` of ``server`` offered to the model? (``servers``: every configured name, so
    an entry of ``tools.enabled`` belongs to the server with the longest matching prefix.)"""
    if include and not any(fnmatchcase(tool, pattern) for pattern in include):
        return False
    if any(fnmatchcase(tool, pattern) for pattern in exclude):
        return False
    names = list(servers)
    own = [entry for entry in enabled if _owner(entry, names) == server]
    if not own:
        return True
    full = tool_name(server, tool)
    return any(fnmatchcase(full, entry) for entry in own)


def _owner(entry: str, servers: list[str]) -> str | None:
    matching = [name for name in servers if entry.startswith(f"mcp_{name}_")]
    return max(matching, key=len) if matching else None

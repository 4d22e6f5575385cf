"""How an MCP server's tools are named and chosen for the model (pure).

A tool ``search`` of the server ``web`` is offered as ``mcp_web_search`` (characters a function
name may not hold become ``_``; at most 64 characters). Two tools of one server whose names
come out the same (``a.b`` and ``a_b``, or a cut at 64) each get a suffix from their own name
(``mcp_web_a_b_3f2a91``), whichever is listed first; two servers never share a name, as no
server's name may start with another's and ``_`` (a config error, ``config._check_mcp``), so
``owner`` finds the one server a name belongs to.

The server's ``include`` / ``exclude`` (its own tool names, globs allowed) choose first; then
``tools.enabled``: when it names tools of this server (``mcp_web_search``, ``mcp_web_*``) only
those are offered, else all that passed. An entry belongs to the server whose ``mcp_<name>_`` it
starts with (``owner``); ``tools.approval.auto`` follows the same rule.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64  # OpenAI's limit on a function name


def tool_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``."""
    return f"mcp_{server}_{_NOT_IN_NAME.sub('_', tool)}"[:MAX_NAME]


def tool_names(server: str, tools: Iterable[str]) -> dict[str, str]:
    """The names of ``server``'s ``tools``, each tool's own: those that come out the same get
    a suffix from the tool's name (never first-listed-wins)."""
    tools = list(dict.fromkeys(tools))
    plain = {tool: tool_name(server, tool) for tool in tools}
    count = Counter(plain.values())
    names: dict[str, str] = {}
    for tool, name in plain.items():
        if count[name] > 1:
            suffix = hashlib.sha256(tool.encode("utf-8", "surrogatepass")).hexdigest()[:6]
            name = f"{name[: MAX_NAME - 7]}_{suffix}"
        names[tool] = name
    return names


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
    own = [entry for entry in enabled if owner(entry, names) == server]
    if not own:
        return True
    full = tool_name(server, tool)
    return any(fnmatchcase(full, entry) for entry in own)


def owner(entry: str, servers: Iterable[str]) -> str | None:
    """The server a tool name or a glob of ``tools.enabled`` / ``tools.approval.auto``
    belongs to (the longest ``mcp_<server>_`` it starts with); None: no one server's."""
    matching = [name for name in servers if entry.startswith(f"mcp_{name}_")]
    return max(matching, key=len) if matching else None

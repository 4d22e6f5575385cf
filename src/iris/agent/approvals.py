"""Ask before acting: which tool calls wait for a person's yes, and what the model is told when
one was not approved.

``ApprovalPolicy`` (``tools.approval``) says whether a tool asks: in mode ``ask``, ``terminal``,
every MCP tool (``mcp_*``) and Home Assistant's ``ha_call_service`` do unless ``auto`` names
them (names or globs); built-ins that only read (``read_file``) never do; in mode ``off``
nothing asks. An ``auto`` entry that starts with a server's ``mcp_<server>_`` belongs to that
server (the owner rule of ``tools.enabled``, ``iris.agent.mcp.naming.owner``) and matches only
its tools: ``mcp_search_*`` never approves a tool of a server ``search_admin`` (server names
like these are a config error besides).

The broker the turns wait on, its requests, answers and allowances, is state
(``iris.state.approvals``: ``Approvals``, ``MemoryApprovals``, ``RedisApprovals``,
``approvals_for``); its names are re-exported here for the callers that know them from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Literal

from iris.agent.mcp.naming import owner
from iris.state.approvals import (
    DECISIONS,
    Approvals,
    Decision,
    Outcome,
    Resolution,
    RespondResult,
    approvals_for,
)

if TYPE_CHECKING:
    from iris.config import ApprovalConfig

__all__ = [
    "DECISIONS",
    "ApprovalPolicy",
    "Approvals",
    "Decision",
    "Outcome",
    "RespondResult",
    "Resolution",
    "approvals_for",
    "refusal",
    "unaskable",
]

# Tools that act on the world (``ha_call_service``: Home Assistant's services, ``house_tools``;
# ``a2a_*``: remote agents).
ASKED_BY_DEFAULT = ("terminal", "mcp_*", "a2a_*", "ha_call_service")


def refusal(outcome: Outcome, by: str) -> str:
    """The tool result the model sees for a call that was not approved: a refusal to respect,
    never an error to retry ("silence is not consent")."""
    why = {
        "deny": f"denied by {by}",
        "timeout": "nobody answered in time; silence is not consent",
        "cancelled": "the turn was interrupted",
    }.get(outcome, outcome)
    return refused(why)


def refused(why: str) -> str:
    return (
        f"not approved ({why}); the tool was not run. Do not try to work around it or retry "
        "it another way; tell the user it was not approved."
    )


def unaskable(tool_name: str) -> str:
    """The result of a call that asks where nobody can be asked (a surface with no prompt)."""
    return refused(f"tools.approval asks before '{tool_name}' runs, and nobody can be asked here")


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    mode: Literal["ask", "off"] = "ask"
    auto: tuple[str, ...] = ()
    timeout: float = 120.0
    servers: tuple[str, ...] = ()  # the MCP servers' names (``mcp_servers``), for the owner rule
    allow_ttl: float = 86_400.0  # seconds an "allow in this chat" lasts

    @classmethod
    def configured(cls, config: ApprovalConfig, servers: Iterable[str] = ()) -> ApprovalPolicy:
        return cls(
            config.mode, tuple(config.auto), config.timeout, tuple(servers), config.allow_ttl
        )

    def asks(self, tool_name: str, also: tuple[str, ...] = ()) -> bool:
        """Does a call of ``tool_name`` wait for a person's yes? ``also``: names the surface
        asks for besides the defaults."""
        if self.mode == "off" or any(self._auto(entry, tool_name) for entry in self.auto):
            return False
        return any(fnmatchcase(tool_name, g) for g in (*ASKED_BY_DEFAULT, *also))

    def _auto(self, entry: str, tool_name: str) -> bool:
        """Does ``auto``'s ``entry`` approve ``tool_name``: its glob matches, and an entry of
        one server's applies to that server's tools only."""
        if not fnmatchcase(tool_name, entry):
            return False
        server = owner(entry, self.servers)
        return server is None or owner(tool_name, self.servers) == server

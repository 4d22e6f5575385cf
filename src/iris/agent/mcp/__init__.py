"""MCP tool servers (the official ``mcp`` SDK as the client): ``mcp_servers:`` in the config.

``McpServers`` (``servers.py``) runs one ``McpConnection`` (``connection.py``) per server and
keeps their tools in the agent's registry; ``naming.py`` decides the names and which tools are
offered; ``results.py`` turns a call's result and progress into what the model and the
surfaces see. See docs/tools.md.

This package and ``naming.py`` import no part of the SDK (``mcp``, ``mcp_types``: half a second
of start-up): the agent imports ``servers`` only when ``mcp_servers:`` names a server, so an
``iris serve`` without MCP servers never loads it. What the surfaces need either way is here.
"""

from __future__ import annotations

__all__ = ["SignInFailed"]


class SignInFailed(Exception):
    """Why a sign-in to an ``auth: oauth`` server did not end with tokens (said to the person;
    never holds a secret). ``signin.py`` raises it, and the surfaces catch it whether or not
    any server is configured."""

"""MCP tool servers (the official ``mcp`` SDK as the client): ``mcp_servers:`` in the config.

``McpServers`` (``servers.py``) runs one ``McpConnection`` (``connection.py``) per server and
keeps their tools in the agent's registry; ``naming.py`` decides the names and which tools are
offered; ``results.py`` turns a call's result and progress into what the model and the
surfaces see. See docs/tools.md.
"""

from iris.agent.mcp.connection import McpConnection
from iris.agent.mcp.servers import McpServers

__all__ = ["McpConnection", "McpServers"]

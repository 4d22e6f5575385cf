"""MCP server mode: Iris's chats offered to other assistants as MCP tools (``/mcp``, stdio)."""

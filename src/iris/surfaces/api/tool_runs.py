"""The agent's own tool runs as Responses API items: ``mcp_call`` and ``mcp_list_tools``.

OpenAI's API shows a hosted MCP server's call as an ``mcp_call`` output item; Iris shows every
tool its agent runs the same way — an MCP server's (``server_label`` the server's name in
``mcp_servers``, ``name`` the tool's own name there) and the built-ins (``server_label``
``iris``). The first response of a conversation that offers a server's tools lists them in an
``mcp_list_tools`` item, as OpenAI's does. What the encoder needs to know about the tools
(``ToolView``) is built here from the agent's registry; the items are built here too (pure).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from iris.agent.tools import ToolRegistry
from iris.events import ApprovalRequested
from iris.state.responses import Responses

Payload = dict[str, Any]

BUILT_IN_LABEL = "iris"  # the server_label of Iris's own tools (terminal, read_file, ...)
# How far back a conversation's responses are searched for an earlier ``mcp_list_tools``.
LISTED_LOOKBACK = 32


def _built_in(name: str) -> tuple[str, str]:
    return BUILT_IN_LABEL, name


@dataclass(frozen=True)
class ToolView:
    """What the encoder knows of a turn's tools.

    ``label(name)``: the ``server_label`` and the tool's own name for a name the model called.
    ``asks(name)``: whether a call of it waits for an approval (its ``mcp_call`` item then
    comes in the response that carries the approved call on, as on OpenAI's API).
    ``listings``: the ``mcp_list_tools`` items' ``(server_label, tools)`` this response opens
    with. ``answered``: the approval request the response's input answered."""

    label: Callable[[str], tuple[str, str]] = _built_in
    asks: Callable[[str], bool] = lambda _name: False
    listings: Sequence[tuple[str, list[Payload]]] = ()
    answered: ApprovalRequested | None = None


@dataclass
class Run:
    """One ``mcp_call`` item being streamed."""

    id: str
    index: int
    server_label: str
    name: str
    arguments: str
    approval_request_id: str | None = None
    notes: list[str] = field(default_factory=list[str])

    def payload(self, status: str, output: str | None = None, error: str | None = None) -> Payload:
        item: Payload = {
            "id": self.id,
            "type": "mcp_call",
            "status": status,
            "server_label": self.server_label,
            "name": self.name,
            "arguments": self.arguments,
            "output": output,
            # The form of OpenAI's current API (the openai SDKs' ``McpToolCallError``).
            "error": None if error is None else _execution_error(error),
        }
        if self.approval_request_id is not None:
            item["approval_request_id"] = self.approval_request_id
        return item


def _execution_error(text: str) -> Payload:
    return {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": text}]}


def call_arguments(args: dict[str, Any]) -> str:
    """The JSON text of a call's arguments (as the model wrote them when they did not parse)."""
    raw = args.get("_raw")
    if set(args) == {"_raw"} and isinstance(raw, str):
        return raw
    return json.dumps(args, ensure_ascii=False)


def list_item(item_id: str, server_label: str, tools: list[Payload]) -> Payload:
    # No ``error`` key at all: the AI SDK's schema takes a string or nothing, never null.
    return {"id": item_id, "type": "mcp_list_tools", "server_label": server_label, "tools": tools}


def labeler(registry: ToolRegistry) -> Callable[[str], tuple[str, str]]:
    """``ToolView.label`` for the agent's tools: an MCP tool's server and own name."""

    def label(name: str) -> tuple[str, str]:
        tool = registry.get(name)
        if tool is None or not tool.server:
            return _built_in(name)
        return tool.server, tool.remote or name

    return label


def listings(registry: ToolRegistry, offered: Iterable[str], seen: set[str]) -> list[Any]:
    """The ``(server_label, tools)`` of each server whose tools ``offered`` holds and that
    ``seen`` (labels listed earlier in the conversation) does not."""
    by_server: dict[str, list[Payload]] = {}
    for name in offered:
        tool = registry.get(name)
        if tool is None:
            continue
        server = tool.server or BUILT_IN_LABEL
        if server in seen:
            continue
        entry: Payload = {"name": tool.remote or tool.name, "input_schema": tool.parameters}
        if tool.description:
            entry["description"] = tool.description
        by_server.setdefault(server, []).append(entry)
    return list(by_server.items())


def listed_in(items: Iterable[Any]) -> set[str]:
    """The server labels an earlier ``mcp_list_tools`` among ``items`` listed."""
    return {
        str(item.get("server_label"))
        for item in items
        if isinstance(item, dict) and item.get("type") == "mcp_list_tools"  # pyright: ignore[reportUnknownMemberType]
    }


async def listed_before(
    responses: Responses, previous: str | None, past: Sequence[Any] | None
) -> set[str] | None:
    """The server labels already listed in this conversation: in a named conversation's
    items, or in the responses ``previous`` chains back to. None: the chain goes back further
    than ``LISTED_LOOKBACK`` responses (a conversation that long listed them long ago)."""
    seen = listed_in(past or [])
    response_id = previous
    for _ in range(LISTED_LOOKBACK):
        if not isinstance(response_id, str) or not response_id:
            return seen
        response = await responses.response(response_id)
        if response is None:
            return seen
        seen |= listed_in(response.get("output") or [])
        response_id = response.get("previous_response_id")
    return None


async def tool_view(
    registry: ToolRegistry,
    asks: Callable[[str], bool],
    offered: Iterable[str],
    seen: Awaitable[set[str] | None],
) -> ToolView:
    """The view of an agent turn's tools; ``seen``: ``listed_before``'s answer."""
    earlier = await seen
    shown = [] if earlier is None else listings(registry, offered, earlier)
    return ToolView(labeler(registry), asks, shown)

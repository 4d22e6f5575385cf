"""MCP server mode's tools, on the ``mcp`` SDK's server API: the iris chats for another assistant.

``chats_list``, ``chat_read`` (paged), ``chat_send`` (the reply's text as the call's progress
notifications as it forms, then the whole reply), ``chat_stop``, ``approvals_list`` and
``approval_respond``; each is one ``ChatDesk`` call. A refusal is the tool's error result,
``<code>: <message>``. The caller is who the transport says (``caller_of``): over HTTP the
endpoint authenticated the request and names its caller in ``CALLER_HEADER`` (a client's own
header of that name is dropped first); on stdio, the local user.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import unquote

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from iris import __version__
from iris.errors import StoreUnavailable
from iris.surfaces.mcp_server.desk import CALLER_HEADER, Caller, ChatDesk, DeskError

LOCAL = Caller("local", "mcp:local")
INSTRUCTIONS = (
    "Iris's chats. chats_list and chat_read show them; chat_send sends a message to a chat "
    "(or a new one) and returns the reply, its text arriving as progress while it forms; "
    "chat_stop interrupts a reply; a tool Iris wants to run may wait for a yes: "
    "approvals_list shows them, approval_respond answers once, chat or deny."
)

T = TypeVar("T")


def caller_of(ctx: Context) -> Caller:
    headers: Mapping[str, str] | None = ctx.headers
    name = None if headers is None else headers.get(CALLER_HEADER)
    if not name:
        return LOCAL
    name = unquote(name)  # quoted by the endpoint: a device's name may be any text
    return Caller(name, f"mcp:{name}")


async def answered(call: Awaitable[T]) -> T:
    """The desk's answer, or its refusal as the tool's error."""
    try:
        return await call
    except DeskError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc
    except StoreUnavailable as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc


def build_server(desk: ChatDesk) -> MCPServer:
    # MCPServer() calls logging.basicConfig with a Rich handler, which would reformat (and
    # wrap) every log line of the process; a root that has a handler makes that a no-op.
    root = logging.getLogger()
    placeholder = None if root.handlers else logging.NullHandler()
    if placeholder is not None:
        root.addHandler(placeholder)
    try:
        server: MCPServer = MCPServer("iris", instructions=INSTRUCTIONS, version=__version__)
    finally:
        if placeholder is not None:
            root.removeHandler(placeholder)
    _read_tools(server, desk)
    _act_tools(server, desk)
    return server


def _read_tools(server: MCPServer, desk: ChatDesk) -> None:
    @server.tool()
    async def chats_list() -> dict[str, Any]:
        """Iris's chats, newest first: chat_id, title (its first message), updated (Unix s)."""
        return await answered(desk.chats())

    @server.tool()
    async def chat_read(chat_id: str, before: int | None = None, limit: int = 50) -> dict[str, Any]:
        """A page of a chat's messages, oldest first. Without before: the newest page; pass
        the answer's next_before to read further back (null: the start was reached)."""
        return await answered(desk.read(chat_id, before, limit))

    @server.tool()
    async def approvals_list(chat_id: str | None = None) -> dict[str, Any]:
        """Tool calls waiting for a person's yes, in one chat or in all of them."""
        return await answered(desk.approvals(chat_id))


def _act_tools(server: MCPServer, desk: ChatDesk) -> None:
    @server.tool()
    async def chat_send(ctx: Context, text: str, chat_id: str | None = None) -> dict[str, Any]:
        """Send a message to a chat (a new chat without chat_id) and return the reply. The
        reply's text so far arrives as progress notifications while it forms."""
        return await answered(desk.send(chat_id, text, caller_of(ctx), _progress(ctx)))

    @server.tool()
    async def chat_stop(chat_id: str) -> dict[str, Any]:
        """Interrupt the reply a chat is forming (its text so far is kept)."""
        return await answered(_now(lambda: desk.stop(chat_id)))

    @server.tool()
    async def approval_respond(ctx: Context, approval_id: str, decision: str) -> dict[str, Any]:
        """Answer an approval: once (run it this time), chat (allow it in this chat for a
        while) or deny."""
        return await answered(desk.respond(approval_id, decision, caller_of(ctx)))


async def _now(call: Callable[[], T]) -> T:
    return call()


def _progress(ctx: Context) -> Callable[[str], Awaitable[None]]:
    """Each message is one progress notification; progress counts them (it must grow)."""
    sent = 0

    async def tell(message: str) -> None:
        nonlocal sent
        sent += 1
        await ctx.report_progress(sent, None, message)

    return tell

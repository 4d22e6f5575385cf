"""``/signin``: sign in to an ``auth: oauth`` MCP server from a chat, and the route the
authorization server sends the browser back to.

``/signin`` lists the servers that sign in and where each stands. On the iris socket (the web
app: every device there is paired) ``/signin NAME`` answers with the link to open; the
redirect comes back to ``iris serve`` itself at ``CALLBACK_PATH`` on the address the device
reached it by (so the browser that opened the link reaches it too), the server exchanges the
code, keeps the tokens and connects. Elsewhere it says to use the web app or ``iris mcp
login`` (a chat platform's user is not necessarily the operator).

The redirect carries a one-time code in its query: the access log shows the path without it.
With ``--workers`` the redirect must reach the process that made the link (it holds the
sign-in); another answers that it knows no such sign-in (``iris mcp login`` works whatever).
"""

from __future__ import annotations

import asyncio
import html
import logging

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from iris.agent.core import Agent
from iris.agent.mcp import SignInFailed

CALLBACK_PATH = "/iris/mcp/callback"
OUTCOME_WAIT = 60.0  # seconds the callback page waits for the code's exchange
ELSEWHERE = "sign in with /signin {name} in the web app, or `iris mcp login {name}` on the server"


def listing(agent: Agent) -> str:
    """``/signin`` without a name: each ``auth: oauth`` server and where it stands."""
    mcp = agent.mcp
    names = [n for n, c in (mcp.connections if mcp else {}).items() if c.tokens is not None]
    if mcp is None or not names:
        return "no MCP server signs in (auth: oauth)"
    lines = [line for line in mcp.lines() if line.split(":")[0].removeprefix("mcp ") in names]
    return "\n".join([*lines, "usage: /signin NAME"])


def elsewhere(agent: Agent, name: str) -> str:
    """``/signin NAME`` where no link can be shown (a chat platform, the terminal chat)."""
    return listing(agent) if not name else ELSEWHERE.format(name=name)


async def link(agent: Agent, name: str, origin: str) -> str:
    """``/signin NAME`` on the socket reached at ``origin``: the link (raises
    ``SignInFailed``)."""
    if agent.mcp is None:
        raise SignInFailed("no MCP server is configured")
    url = await agent.mcp.sign_in_link(name, origin.rstrip("/") + CALLBACK_PATH)
    return f"Open this link to sign in to {name} (it waits 10 minutes):\n{url}"


def origin_of(scheme: str, host: str) -> str:
    """The http(s) origin a device reached the socket at (``ws``/``wss`` read as such)."""
    secure = scheme in ("https", "wss")
    return f"{'https' if secure else 'http'}://{host}"


def callback_route(agent: Agent) -> Route:
    async def callback(request: Request) -> HTMLResponse:
        query = request.query_params
        mcp = agent.mcp
        state = query.get("state", "")
        outcome = None
        if mcp is not None:
            outcome = mcp.sign_ins.complete(
                state, query.get("code", ""), query.get("iss"), query.get("error")
            )
        if outcome is None:
            return _page(
                400,
                "No sign-in waits for this link here (it ended, or another server "
                "process made it). Start again with /signin NAME.",
            )
        try:
            async with asyncio.timeout(OUTCOME_WAIT):
                said = await outcome
        except TimeoutError:
            said = "The sign-in is still going on; the chat's /signin says how it ends."
        return _page(200, said)

    return Route(CALLBACK_PATH, callback, methods=["GET"])


def _page(status: int, text: str) -> HTMLResponse:
    body = (
        "<!doctype html><meta charset=utf-8><meta name=viewport content='width=device-width'>"
        f"<title>Iris sign-in</title><p>{html.escape(text)}</p>"
    )
    return HTMLResponse(body, status_code=status, headers={"cache-control": "no-store"})


class QuietCallback(logging.Filter):
    """The access log's line for a sign-in redirect, without its query (a one-time code)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            path = args[2]
            if path.startswith(CALLBACK_PATH + "?"):
                record.args = (*args[:2], CALLBACK_PATH, *args[3:])
        return True


def quiet_access_log() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, QuietCallback) for f in access.filters):
        access.addFilter(QuietCallback())

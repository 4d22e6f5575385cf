"""``iris mcp login NAME`` / ``iris mcp logout NAME``: sign in to an ``auth: oauth`` MCP server
from the terminal, or forget its tokens.

The redirect comes back to a loopback port on this machine (RFC 8252 §7.3: a native app's
redirect URI is ``http://127.0.0.1:PORT/callback``): the browser that opens the link runs
where the command does, and nothing has to reach ``iris serve``. The port is a free one
unless ``callback_port`` names it (a ``client_id`` registered by hand names one redirect URI).
The tokens go to Iris's private files, where a running ``iris serve`` finds them within a
minute (``/signin`` on the web app signs in through the server itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import TextIO
from urllib.parse import parse_qs, urlsplit

from mcp.shared.auth import AuthorizationCodeResult

from iris.agent.mcp import SignInFailed
from iris.agent.mcp.oauth import TokenFile, auth_dir
from iris.agent.mcp.signin import sign_in
from iris.config import Config, McpServerConfig
from iris.errors import ConfigError

PAGE = (
    "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {length}"
    "\r\nconnection: close\r\n\r\n{body}"
)
MAX_HEAD = 16384


def run_login(config: Config, name: str, out: TextIO = sys.stdout) -> int:
    server = _oauth_server(config, name)
    folder = auth_dir(config.store.resolved_path().parent)
    try:
        tools = asyncio.run(_login(name, server, folder, out))
    except SignInFailed as exc:
        print(f"iris: sign-in to {name} failed: {exc}", file=sys.stderr)
        return 1
    print(f"Signed in to {name}: {tools} tools; the tokens are in {folder}", file=out)
    return 0


def run_logout(config: Config, name: str, out: TextIO = sys.stdout) -> int:
    server = _oauth_server(config, name)
    tokens = TokenFile(auth_dir(config.store.resolved_path().parent), name, server)
    said = "signed out" if tokens.forget() else "was not signed in"
    print(f"{name}: {said}", file=out)
    return 0


def _oauth_server(config: Config, name: str) -> McpServerConfig:
    server = config.mcp_servers.get(name)
    if server is None or server.auth != "oauth":
        oauth = [n for n, s in config.mcp_servers.items() if s.auth == "oauth"]
        listed = f"; those with it: {', '.join(oauth)}" if oauth else ""
        raise ConfigError(f"no MCP server {name!r} with auth: oauth in the config{listed}")
    return server


async def _login(name: str, server: McpServerConfig, folder: Path, out: TextIO) -> int:
    async with _loopback(server.callback_port) as (redirect_uri, redirected):

        async def show(url: str) -> None:
            print(f"Open this link to sign in to {name}:\n\n  {url}\n", file=out)
            print(f"Waiting for the redirect to {redirect_uri} ...", file=out, flush=True)

        async def callback() -> AuthorizationCodeResult:
            return await redirected

        return await sign_in(name, server, folder, redirect_uri, show, callback)


@contextlib.asynccontextmanager
async def _loopback(
    port: int,
) -> AsyncGenerator[tuple[str, asyncio.Future[AuthorizationCodeResult]]]:
    """A one-page HTTP server on 127.0.0.1: the redirect's ``code`` and ``state``."""
    redirected: asyncio.Future[AuthorizationCodeResult] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            writer.close()
            return
        status, body = _answer(head.decode("latin-1").split(" ")[1:2], redirected)
        page = PAGE.format(status=status, length=len(body.encode()), body=body)
        writer.write(page.encode())
        with contextlib.suppress(OSError):
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, limit=MAX_HEAD)
    bound = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{bound}/callback", redirected
    finally:
        server.close()


def _answer(
    target: list[str], redirected: asyncio.Future[AuthorizationCodeResult]
) -> tuple[str, str]:
    """The page for a request to ``target`` (the first redirect to /callback counts)."""
    parts = urlsplit(target[0] if target else "")
    if parts.path != "/callback":
        return "404 Not Found", "not found"
    query = {key: values[0] for key, values in parse_qs(parts.query).items()}
    if redirected.done():
        return "409 Conflict", "This sign-in is over; you can close this tab."
    if "error" in query:
        reason = query.get("error_description") or query["error"]
        redirected.set_exception(SignInFailed(f"the authorization server said: {reason}"))
        return "200 OK", "Sign-in refused. You can close this tab."
    code = query.get("code", "")
    redirected.set_result(
        AuthorizationCodeResult(code=code, state=query.get("state"), iss=query.get("iss"))
    )
    return "200 OK", "Signed in. You can close this tab and go back to the terminal."

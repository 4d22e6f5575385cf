"""``/mcp`` on ``iris serve``: MCP server mode over Streamable HTTP (the ``mcp`` SDK's transport).

Before the SDK sees a request it passes what every iris route checks: the site guard
(``Host``/``Origin``, ``iris.surfaces.origin``), the failed-authentication throttle
(``iris.auth_throttle``) and ``Authorization: Bearer <token>`` with the API server's key
(``platforms.api_server.api_key``) or an iris device token (a config token or a paired
device's, ``iris.surfaces.socket.access``). Failures are JSON ``{"error": {...}}``: 403 for the
site guard, 429 ``too_many_failed_authentications``, 401 ``unauthorized`` / ``revoked``, 503
``store_unavailable``. The request then reaches the SDK naming its caller in ``CALLER_HEADER``.

The transport is stateless (each POST is answered on its own, its progress on its own SSE
stream): any process of ``iris serve --workers N`` can answer any request.

The SDK (half a second to import) loads with the first request that passed the checks, not at
start-up: most servers never see an MCP client. Its transport then runs in a task of its own
until ``stop`` (the SDK's task group is entered and left by one task).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import TYPE_CHECKING
from urllib.parse import quote

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from iris.auth_throttle import client_address
from iris.errors import StoreUnavailable
from iris.surfaces.mcp_server.desk import CALLER_HEADER, Caller, ChatDesk
from iris.surfaces.refusals import refusal, throttled, unauthorized
from iris.surfaces.socket.access import bearer
from iris.surfaces.socket.endpoint import SocketSurface
from iris.tasks import Supervisor

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger(__name__)

PATH = "/mcp"
SURFACE = "mcp"  # the throttle's name for this surface


class McpSurface:
    """MCP server mode on the server: the route, and the SDK's transport from its first
    request to stop."""

    def __init__(self, iris: SocketSurface) -> None:
        self.iris = iris
        self.runtime = iris.runtime
        self._manager: asyncio.Future[StreamableHTTPSessionManager] | None = None
        self._running = Supervisor()
        key = self.runtime.config.platforms.api_server.api_key
        self._key = key.encode() if key else None

    def routes(self) -> list[BaseRoute]:
        # The surface itself is the route's ASGI app (a method would be taken for a
        # request/response handler).
        return [Route(PATH, self, methods=["GET", "POST", "DELETE"])]

    async def start(self) -> None:
        pass  # the SDK's transport starts with the first request (``_transport``)

    async def stop(self) -> None:
        await self._running.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = await self._refusal(scope)
        if isinstance(refused, JSONResponse):
            await refused(scope, receive, send)
            return
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != CALLER_HEADER.encode()]
        headers.append((CALLER_HEADER.encode(), quote(refused.name).encode()))
        manager = await self._transport()
        await manager.handle_request({**scope, "headers": headers}, receive, send)

    async def _transport(self) -> StreamableHTTPSessionManager:
        """The SDK's transport, started by the first request that asks for it."""
        if self._manager is None:
            self._manager = asyncio.get_running_loop().create_future()
            self._running.create_task(self._run(self._manager), name="mcp server mode")
        # Shielded: a request that goes away must not cancel the start every request awaits.
        return await asyncio.shield(self._manager)

    async def _run(self, started: asyncio.Future[StreamableHTTPSessionManager]) -> None:
        """Load the SDK, build the server on the iris chats and run its transport until
        ``stop`` cancels this task."""
        try:
            from mcp.server.transport_security import TransportSecuritySettings

            from iris.surfaces.mcp_server.chat_tools import build_server

            server = build_server(ChatDesk(self.iris))
            # Host/Origin are the site guard's: the SDK's own check would refuse a proxy's name.
            server.streamable_http_app(
                stateless_http=True,
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            manager = server.session_manager
            async with manager.run():
                started.set_result(manager)
                await asyncio.Event().wait()  # until stop cancels this task
        except Exception as exc:
            log.exception("MCP server mode failed")
            if not started.done():
                started.set_exception(exc)
        finally:
            if not started.done():
                started.cancel()  # stopped while it started: its requests end with it

    async def _refusal(self, scope: Scope) -> Caller | JSONResponse:
        """The request's caller, or the answer that refuses it."""
        headers = Headers(scope=scope)
        site = self.iris.site.refusal(headers, scope.get("server"), scope["scheme"])
        if site is not None:
            return refusal(403, site.message, site.code, "permission_error")
        guard, address = self.runtime.guard, client_address(scope)
        wait = guard.refused(address, SURFACE)
        if wait is not None:
            return throttled(wait)
        try:
            caller = await self._caller(bearer(headers.get("authorization", "")) or "")
        except StoreUnavailable as exc:
            return refusal(503, exc.message, exc.code, "server_error")
        if isinstance(caller, Caller):
            return caller
        guard.failed(address, SURFACE)
        message = (
            "This device's token was revoked."
            if caller == "revoked"
            else "Send 'Authorization: Bearer <token>' with the API key or a device token."
        )
        return unauthorized(caller, message)

    async def _caller(self, token: str) -> Caller | str:
        """Who ``token`` is: the API key's holder, a device; else why not."""
        if self._key is not None and token and hmac.compare_digest(token.encode(), self._key):
            return Caller("api", "mcp:api")
        check = await self.iris.gate.check(token)
        if check.status != "ok":
            return "revoked" if check.status == "revoked" else "unauthorized"
        name = check.name or "device"
        return Caller(name, f"mcp:{name}")

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
"""

from __future__ import annotations

import contextlib
import hmac
from urllib.parse import quote

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from iris.auth_throttle import client_address
from iris.errors import StoreUnavailable
from iris.surfaces.mcp_server.chat_tools import CALLER_HEADER, build_server
from iris.surfaces.mcp_server.desk import Caller, ChatDesk
from iris.surfaces.refusals import refusal, throttled, unauthorized
from iris.surfaces.socket.access import bearer
from iris.surfaces.socket.endpoint import SocketSurface

PATH = "/mcp"
SURFACE = "mcp"  # the throttle's name for this surface


class McpSurface:
    """MCP server mode on the server: the route, and the SDK's transport from start to stop."""

    def __init__(self, iris: SocketSurface) -> None:
        self.iris = iris
        self.runtime = iris.runtime
        server = build_server(ChatDesk(iris))
        # Host/Origin are the site guard's: the SDK's own check would refuse a proxy's name.
        server.streamable_http_app(
            stateless_http=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager: StreamableHTTPSessionManager = server.session_manager
        self._running = contextlib.AsyncExitStack()
        key = self.runtime.config.platforms.api_server.api_key
        self._key = key.encode() if key else None

    def routes(self) -> list[BaseRoute]:
        # The surface itself is the route's ASGI app (a method would be taken for a
        # request/response handler).
        return [Route(PATH, self, methods=["GET", "POST", "DELETE"])]

    async def start(self) -> None:
        await self._running.enter_async_context(self.manager.run())

    async def stop(self) -> None:
        await self._running.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = await self._refusal(scope)
        if isinstance(refused, JSONResponse):
            await refused(scope, receive, send)
            return
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != CALLER_HEADER.encode()]
        headers.append((CALLER_HEADER.encode(), quote(refused.name).encode()))
        await self.manager.handle_request({**scope, "headers": headers}, receive, send)

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

"""``GET /metrics`` (Prometheus text) and the ``/status`` page, both off unless
``server.metrics.enabled``.

``/metrics`` answers only a request that passes the server's cross-site check (``Host``,
``Origin``: a page elsewhere cannot read it through DNS rebinding) and, with
``server.metrics.token`` set, sends ``Authorization: Bearer <token>`` (compared in constant
time). Without a token the server must be bound to loopback (``check_bind_safety`` refuses
otherwise), so only this machine can scrape it.

``/status`` is a static page (HTML, one ES module, the vendored uPlot; a strict
Content-Security-Policy: only its own scripts and styles, and requests to this server). It holds
no figures itself: it fetches ``/metrics`` every two seconds with the token the operator gives it
(in the page, or as the URL's fragment ``#token=…``, which a browser never sends to a server)
and draws the series of the dashboard live.
"""

from __future__ import annotations

import hmac
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

from iris.config import Config
from iris.observability import metrics
from iris.surfaces.api.problems import error_body
from iris.surfaces.origin import SiteGuard

STATUS_ROOT = Path(__file__).resolve().parent / "status"
STATUS_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_HEADERS = [
    (b"content-security-policy", STATUS_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-cache"),
]


def metrics_routes(config: Config) -> list[BaseRoute]:
    """The routes of ``server.metrics`` (none when it is off)."""
    settings = config.server.metrics
    if not settings.enabled:
        return []
    site = SiteGuard(config.server)
    token = settings.token.encode() if settings.token else None

    async def scrape(request: Request) -> Response:
        refusal = site.refusal(
            request.headers, request.scope.get("server"), request.scope["scheme"]
        )
        if refusal is not None:
            body = error_body(refusal.message, type="permission_error", code=refusal.code)
            return JSONResponse(body, status_code=403)
        if token is not None and not _bearer_ok(request.headers.get("authorization", ""), token):
            body = error_body(
                "Send 'Authorization: Bearer <server.metrics.token>'.",
                type="invalid_request_error",
                code="invalid_metrics_token",
            )
            return JSONResponse(body, status_code=401, headers={"www-authenticate": "Bearer"})
        return Response(
            metrics.render(),
            media_type=metrics.CONTENT_TYPE,
            headers={"cache-control": "no-store"},
        )

    page = _Secured(StaticFiles(directory=STATUS_ROOT, html=True))
    return [
        Route("/metrics", scrape, methods=["GET"]),
        Route("/status", page, methods=["GET", "HEAD"]),
        Mount("/status", app=page),
    ]


def _bearer_ok(header: str, token: bytes) -> bool:
    scheme, _, given = header.partition(" ")
    # Constant time: a comparison must not tell how much of a guess matched.
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token)


class _Secured:
    """The status page's files with its headers on every answer (404s included)."""

    def __init__(self, files: StaticFiles) -> None:
        self._files = files

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] == "/status":
            scope = {**scope, "path": "/"}

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_HEADERS]}
            await send(message)

        await self._files(scope, receive, secured)

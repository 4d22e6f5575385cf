"""Builds the ASGI app from config; its lifespan owns the agent, the store and the surfaces.

Surfaces plug in by constructing from the shared ``Runtime`` (see ``iris.runtime``):

- ``iris.surfaces.api.routes.ApiSurface``      POST /v1/chat/completions, /v1/responses, …
- ``iris.surfaces.socket.endpoint.SocketSurface``  GET /iris/ws (WebSocket)
- ``iris.surfaces.mcp_server.http.McpSurface`` /mcp (MCP server mode, beside the socket)
- ``iris.surfaces.a2a.service.A2aSurface``     /a2a, the agent card (``platforms.a2a``)
- ``iris.surfaces.chat.runner.ChatSurface``    Telegram, Discord, Slack, WhatsApp, Home Assistant
- ``iris.surfaces.web``                        the browser app at ``/`` (with the iris socket)

Any error that escapes a handler is a JSON 500 without the traceback, and Starlette's own
404/405 are JSON too. ``serve`` runs uvicorn with the connection guard of ``iris.server.connections``
(a deadline for request heads, a connection cap) and ``server.timeout_keep_alive``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import AsyncGenerator, Awaitable, Callable
from types import FrameType
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from iris import __version__, observability
from iris.auth_throttle import MIN_EXPOSED_SECRET, MIN_SECRET
from iris.config import Config
from iris.errors import ConfigError
from iris.proxies import ForwardedClient
from iris.runtime import Runtime, ServerSurface
from iris.server.connections import MAX_HEAD_BYTES, BodyGuard, connection_cap, guarded_protocol
from iris.server.endpoints import metrics_routes
from iris.state.redis_store import ERRORS as REDIS_ERRORS
from iris.state.redis_store import RedisStore
from iris.surfaces.api.exchange import SERVER_SEND
from iris.surfaces.api.problems import error_body
from iris.surfaces.origin import is_loopback


def check_bind_safety(config: Config) -> None:
    """Refuse to expose an unauthenticated surface beyond this machine, and to start with a
    secret short enough to guess: an API key, fixed device token or metrics token needs ``MIN_SECRET``
    characters, ``MIN_EXPOSED_SECRET`` on a bind beyond loopback (``iris.auth_throttle``)."""
    host = config.server.host
    least = MIN_SECRET if is_loopback(host) else MIN_EXPOSED_SECRET
    secrets = [("platforms.api_server.api_key", config.platforms.api_server.api_key)]
    secrets += [
        (f"platforms.iris.tokens[{i}]", t) for i, t in enumerate(config.platforms.iris.tokens)
    ]
    secrets.append(("server.metrics.token", config.server.metrics.token or ""))
    secrets.append(("platforms.a2a.api_key", config.platforms.a2a.api_key or ""))
    for key, secret in secrets:
        if secret and len(secret) < least:
            where = "" if least == MIN_SECRET else f" to bind {host}"
            raise ConfigError(
                f"{key} is {len(secret)} characters; it needs at least {least}{where}"
                " (e.g. `openssl rand -hex 32`)"
            )
    if is_loopback(host):
        return
    api = config.platforms.api_server
    if api.enabled and not api.api_key:
        raise ConfigError(
            f"refusing to bind {host}: the API server has no key; set "
            "platforms.api_server.api_key or bind 127.0.0.1"
        )
    a2a = config.platforms.a2a
    if a2a.enabled and not (a2a.api_key or api.api_key):
        raise ConfigError(
            f"refusing to bind {host}: the A2A server has no key; set "
            "platforms.a2a.api_key (or platforms.api_server.api_key) or bind 127.0.0.1"
        )
    metrics = config.server.metrics
    if metrics.enabled and not metrics.token:
        raise ConfigError(
            f"refusing to bind {host}: /metrics has no token; set server.metrics.token "
            "or bind 127.0.0.1"
        )


def build_surfaces(runtime: Runtime) -> list[ServerSurface]:
    config = runtime.config
    surfaces: list[ServerSurface] = []
    if config.platforms.api_server.enabled:
        from iris.surfaces.api.routes import ApiSurface

        surfaces.append(ApiSurface(runtime))
    if config.platforms.iris.enabled:
        from iris.surfaces.mcp_server.http import McpSurface
        from iris.surfaces.socket.endpoint import SocketSurface

        iris = SocketSurface(runtime)
        surfaces.append(iris)
        surfaces.append(McpSurface(iris))  # MCP server mode: the same chats, the same tokens
        if config.platforms.a2a.enabled:
            from iris.surfaces.a2a.service import A2aSurface

            surfaces.append(A2aSurface(iris))  # its tasks are turns in iris chats
    elif config.platforms.a2a.enabled:
        raise ConfigError(
            "platforms.a2a needs platforms.iris enabled: an A2A task is a turn in an iris chat"
        )
    p = config.platforms
    chats = (p.telegram, p.discord, p.slack, p.whatsapp, p.matrix, p.homeassistant)
    if any(section.enabled for section in chats):
        from iris.surfaces.chat.runner import ChatSurface

        surfaces.append(ChatSurface(runtime))
    scheduler = _scheduler(runtime, surfaces)
    if scheduler is not None:
        surfaces.append(scheduler)  # last: it starts once the surfaces it runs on have
    return surfaces


def _scheduler(runtime: Runtime, surfaces: list[ServerSurface]) -> ServerSurface | None:
    """The scheduler of ``/remind`` and ``/every`` over the surfaces that deliver runs."""
    from iris.surfaces.scheduler import RunSurface, Scheduler

    if runtime.schedules is None:
        return None
    by_name: dict[str, RunSurface] = {}
    for surface in surfaces:
        if isinstance(surface, RunSurface):
            by_name.update(dict.fromkeys(surface.run_targets, surface))
    if not by_name:
        return None
    config = runtime.config
    scheduler = Scheduler(runtime.schedules, config.schedules, by_name, lease=config.store.lease)
    runtime.schedule_added = scheduler.wake
    return scheduler


def build_app(config: Config, runtime: Runtime | None = None) -> Starlette:
    runtime = runtime or Runtime.create(config)
    surfaces = build_surfaces(runtime)
    routes: list[BaseRoute] = [Route("/health", _health(runtime), methods=["GET"])]
    for surface in surfaces:
        routes.extend(surface.routes())
    if config.platforms.iris.enabled:
        from iris.surfaces.web import web_routes

        routes.extend(web_routes())
    routes.extend(metrics_routes(config))  # GET /metrics, /status: only when enabled
    app = IrisApp(
        routes=routes,
        lifespan=_lifespan(config, runtime, surfaces),
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
        middleware=[
            Middleware(ForwardedClient, trusted=config.server.trusted_proxies),
            Middleware(NoSniff),
            Middleware(BodyGuard, timeout=config.server.timeout_body, cap_for=body_caps(config)),
        ],
    )
    app.state.runtime = runtime
    app.state.surfaces = surfaces
    return app


class IrisApp(Starlette):
    """The app: Starlette, leaving the server's own ``send`` in each HTTP request's scope
    (``SERVER_SEND``), where a streamed answer writes its body messages past the wrappers that
    act on a response's start only (``iris.surfaces.api.exchange``)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[SERVER_SEND] = send
        await super().__call__(scope, receive, send)


def _health(runtime: Runtime) -> Callable[[Request], Awaitable[JSONResponse]]:
    """``GET /health``: ok, the version and the model; with a shared store, whether it answers."""

    async def health(_: Request) -> JSONResponse:
        body: dict[str, Any] = {
            "status": "ok",
            "version": __version__,
            "model": runtime.agent.model_name,
        }
        if runtime.shared is None:
            return JSONResponse(body)
        # A node whose store does not answer cannot serve what it shares: a 503 makes a load
        # balancer drain it (a green health check on a deaf worker hides the outage).
        body["store"] = "ok" if await store_answers(runtime.shared) else "unavailable"
        if body["store"] == "ok":
            return JSONResponse(body)
        return JSONResponse({**body, "status": "unavailable"}, status_code=503)

    return health


def _lifespan(
    config: Config, runtime: Runtime, surfaces: list[ServerSurface]
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    """The app's life: the tools and every surface started in order, stopped in reverse."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncGenerator[None]:
        started: list[ServerSurface] = []
        # The SDK clients are built now, not on the event loop under the first request.
        runtime.agent.prepare()
        observability.start(config)
        try:
            await runtime.agent.start_tools()  # MCP servers, each connected or failed once
            for surface in surfaces:
                await surface.start()
                started.append(surface)
            yield
        finally:
            for surface in reversed(started):
                with contextlib.suppress(Exception):
                    await surface.stop()
            await runtime.agent.aclose()
            if runtime.shared is not None:
                await runtime.shared.aclose()
            observability.stop()

    return lifespan


# A route that names no cap of its own takes bodies up to this (the API's is
# ``platforms.api_server.max_body_bytes``, the WhatsApp webhook's ``whatsapp.MAX_BODY``).
DEFAULT_BODY_CAP = 1 << 20


def body_caps(config: Config) -> Callable[[str], int]:
    """The most bytes of body each route takes, by path (``BodyGuard``)."""
    from iris.surfaces.chat.platforms.whatsapp import MAX_BODY, WEBHOOK_PATH

    api = config.platforms.api_server.max_body_bytes

    def cap_for(path: str) -> int:
        if path.startswith("/v1/"):
            return api
        if path == WEBHOOK_PATH:
            return MAX_BODY
        return DEFAULT_BODY_CAP

    return cap_for


async def store_answers(shared: RedisStore) -> bool:
    """Does the shared store take a write within its timeout? A ``PING`` answers even when
    Redis refuses every write (``maxmemory`` reached, a read-only replica): a small expiring
    ``SET`` does not."""
    try:
        async with asyncio.timeout(shared.timeout):
            key = shared.key("health", shared.process_id)
            return bool(await shared.aio.set(key, "1", px=10_000))
    except (*REDIS_ERRORS, TimeoutError):
        return False


async def _http_error(request: Request, exc: Exception) -> Response:
    # Starlette's own 404/405 (paths outside /v1, a POST to /health) in the API's shape.
    assert isinstance(exc, HTTPException)
    body = error_body(exc.detail, type="invalid_request_error", code=f"http_{exc.status_code}")
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    # A bug in a handler: the client gets a JSON 500 without the traceback; the log keeps it
    # (Starlette re-raises after this answer, and uvicorn logs the exception).
    body = error_body("Iris failed to handle this request.", type="server_error", code="internal")
    return JSONResponse(body, status_code=500, headers={"x-content-type-options": "nosniff"})


class NoSniff:
    """``X-Content-Type-Options: nosniff`` on every HTTP answer (JSON, 404s, the web app's
    files): a browser never runs an answer as another type than it says."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"x-content-type-options" for name, _ in headers):
                    headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)


UVICORN_WS_OPTIONS: dict[str, Any] = {
    "ws_max_size": 1 << 20,
    # permessage-deflate cost ~35 KiB of zlib state per idle device and most of the fan-out
    # CPU (bench/ws_fanout.py); iris frames are small JSON on a local or LAN link.
    "ws_per_message_deflate": False,
}


def uvicorn_options(config: Config) -> dict[str, Any]:
    """What every server process runs with (one, or each of ``--workers``): the connection
    guard, the keep-alive and shutdown timeouts, the WebSocket options."""
    server = config.server
    return {
        "log_level": "info",
        "timeout_graceful_shutdown": 5,
        "timeout_keep_alive": server.timeout_keep_alive,
        "http": guarded_protocol(server.timeout_headers, connection_cap(server.max_connections)),
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
        # uvicorn believes X-Forwarded-For from 127.0.0.1 by default: a local peer could name
        # any address. ``server.trusted_proxies`` decides instead (``iris.proxies``).
        "proxy_headers": False,
        **UVICORN_WS_OPTIONS,
    }


def serve(config: Config) -> None:
    """Run ``iris serve`` until Ctrl-C / SIGTERM (uvicorn handles both gracefully)."""
    import uvicorn

    check_bind_safety(config)
    app = build_app(config)
    settle_heap()
    # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal under the handler it
    # found; with the default one that kills the process (exit 143) after a clean shutdown.
    previous = signal.signal(signal.SIGTERM, exit_cleanly)
    try:
        uvicorn.run(
            app, host=config.server.host, port=config.server.port, **uvicorn_options(config)
        )
    finally:
        signal.signal(signal.SIGTERM, previous)


def settle_heap() -> None:
    """Before serving: what start-up made (modules, the app, its config and schemas) leaves
    the collector's view (``gc.freeze``), and young collections wait for more new objects.
    Each chunk of each stream makes a few dozen short-lived containers; with CPython's
    default threshold (700) the collector ran every few chunks (a tenth of a busy server's
    samples in ``bench/chunk_cost.py``'s profile). Reference counting still frees nearly all
    of it at once; cycles are still collected, less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(_GC_YOUNG, *gc.get_threshold()[1:])


_GC_YOUNG = 20_000


def exit_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)

"""The A2A server on ``iris serve`` (``platforms.a2a.enabled``), on the official ``a2a-sdk``.

- ``GET /.well-known/agent-card.json``: the agent card (``iris.surfaces.a2a.card``), public;
- ``POST /a2a``: JSON-RPC, the protocol's v1.0 methods (``SendMessage``,
  ``SendStreamingMessage``, ``GetTask``, ``CancelTask``, ``SubscribeToTask``, the push config
  methods) and their v0.3 names (``message/send``, ``message/stream``, ``tasks/get``,
  ``tasks/cancel``, ``tasks/resubscribe``, ``tasks/pushNotificationConfig/*``).

``POST /a2a`` passes the site guard (``Host``/``Origin``) and, with a key
(``platforms.a2a.api_key``, else ``platforms.api_server.api_key``), ``Authorization: Bearer
<key>`` compared in constant time, with the failed-authentication throttle; without a key the
server must be bound to loopback (``check_bind_safety``). Tasks live in ``iris.state.a2a_tasks``
(SQLite, or Redis with ``store.url``), so any process can serve any task: ``tasks/get`` and
the push configs from the store; ``tasks/resubscribe`` and the answer to an approval on a
process that does not run the turn follow the chat's shared frame log (``iris.surfaces.a2a.handler``).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from iris.auth_throttle import client_address
from iris.config import Config
from iris.state.a2a_tasks import a2a_tasks_for
from iris.surfaces.a2a.callbacks import SignedPushSender
from iris.surfaces.a2a.card import PATH, agent_card
from iris.surfaces.a2a.executor import IrisExecutor
from iris.surfaces.a2a.handler import IrisRequestHandler
from iris.surfaces.a2a.stores import StoredPushConfigs, StoredTasks
from iris.surfaces.refusals import refusal, throttled, unauthorized
from iris.surfaces.socket.access import bearer
from iris.surfaces.socket.endpoint import SocketSurface
from iris.tasks import OpenGroup

SURFACE = "a2a"  # the throttle's name for this surface


def a2a_key(config: Config) -> str | None:
    """The key A2A clients send: ``platforms.a2a.api_key``, else the API server's."""
    return config.platforms.a2a.api_key or config.platforms.api_server.api_key


class A2aSurface:
    def __init__(self, iris: SocketSurface) -> None:
        self.iris = iris
        self.runtime = iris.runtime
        config = self.runtime.config
        self.settings = config.platforms.a2a
        key = a2a_key(config)
        self._key = key.encode() if key else None
        tasks = a2a_tasks_for(self.runtime.store, self.runtime.shared)
        self._pushing = OpenGroup()
        configs = StoredPushConfigs(tasks)
        allow = [ipaddress.ip_network(n, strict=False) for n in self.settings.push_allow]
        self.push = SignedPushSender(configs, allow, self._pushing)
        self.executor = IrisExecutor(iris)
        self.handler = IrisRequestHandler(
            agent_executor=self.executor,
            task_store=StoredTasks(tasks),
            agent_card=agent_card(self.settings, "http://127.0.0.1", self._key is not None),
            push_config_store=configs,
            push_sender=self.push,
            push_url_validator=self.push.allowed,
        )
        self._rpc = JsonRpcDispatcher(self.handler, enable_v0_3_compat=True)

    def routes(self) -> list[BaseRoute]:
        return [
            Route(AGENT_CARD_WELL_KNOWN_PATH, self._card, methods=["GET"]),
            Route(PATH, self._call, methods=["POST"]),
        ]

    async def start(self) -> None:
        await self._pushing.open()

    async def stop(self) -> None:
        try:
            await self.handler.aclose()
        finally:
            await self._pushing.close()
            await self.push.aclose()
            _stop_sse_watcher()

    async def _card(self, request: Request) -> Response:
        card = agent_card(self.settings, str(request.base_url), self._key is not None)
        return JSONResponse(agent_card_to_dict(card), headers={"cache-control": "no-cache"})

    async def _call(self, request: Request) -> Response:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        return await self._rpc.handle_requests(request)

    def _refusal(self, request: Request) -> Response | None:
        scope = request.scope
        site = self.iris.site.refusal(request.headers, scope.get("server"), scope["scheme"])
        if site is not None:
            return refusal(403, site.message, site.code, "permission_error")
        if self._key is None:
            return None
        guard, address = self.runtime.guard, client_address(scope)
        wait = guard.refused(address, SURFACE)
        if wait is not None:
            return throttled(wait)
        token = bearer(request.headers.get("authorization", "")) or ""
        if hmac.compare_digest(token.encode(), self._key):
            return None
        guard.failed(address, SURFACE)
        return unauthorized(
            "unauthorized", "Send 'Authorization: Bearer <key>' (platforms.a2a.api_key)."
        )


def _stop_sse_watcher() -> None:
    """End the task ``sse-starlette`` starts with the first SSE answer (the SDK's streams): it
    polls for uvicorn's exit through the SIGTERM handler, which a server without one (tests,
    an embedding app) never shows, so it would outlive the server. Its ``finally`` lets the
    next stream start it again."""
    for task in asyncio.all_tasks():
        if getattr(task.get_coro(), "__qualname__", "") == "_shutdown_watcher":
            task.cancel()

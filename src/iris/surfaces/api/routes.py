"""The OpenAI-compatible API surface: routes, auth, limits, and the wiring of the encoders.

    POST /v1/chat/completions    Chat Completions, streamed (SSE) or not
    POST /v1/responses           Responses, streamed (SSE) or not; stored in SQLite
    GET  /v1/responses/{id}      a stored response
    GET  /v1/models              the configured model

Every failure before the first byte is an OpenAI error body with a 4xx (see ``problems``);
after it, the encoders report it in-band (see ``exchange``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from iris.agent.core import TurnRequest
from iris.errors import StoreUnavailable
from iris.events import Event, TurnEnded
from iris.runtime import Runtime
from iris.surfaces.api.bodies import ChatCall, ResponsesCall, parse_chat, parse_responses
from iris.surfaces.api.chat_encoder import ChatEncoder
from iris.surfaces.api.exchange import TurnExchange, Wire
from iris.surfaces.api.problems import ApiError, bad_request, error_body, failure_status
from iris.surfaces.api.responses_encoder import ResponsesEncoder
from iris.surfaces.api.responses_store import ResponsesStore
from iris.surfaces.api.sse import data_frames, named_frames

Json = dict[str, Any]


class ChatWire:
    def __init__(self, call: ChatCall) -> None:
        self.encoder = ChatEncoder(
            f"chatcmpl-{uuid.uuid4().hex}",
            call.model,
            int(time.time()),
            include_usage=call.include_usage,
        )

    def frames(self, event: Event) -> bytes:
        return data_frames(self.encoder.feed(event))

    def answer(self) -> tuple[int, Json]:
        failure = self.encoder.failure
        if failure is not None:
            return _failure(failure.code, failure.message)
        return 200, self.encoder.completion()

    async def finished(self) -> None:
        pass


class ResponsesWire:
    def __init__(self, call: ResponsesCall, store: ResponsesStore) -> None:
        self.call = call
        self.store = store
        self.encoder = ResponsesEncoder(
            f"resp_{uuid.uuid4().hex}", call.model, int(time.time()), call.echo, clock=time.time
        )
        self._added: list[Json] = []  # chat-format messages the turn added

    def frames(self, event: Event) -> bytes:
        if isinstance(event, TurnEnded):
            self._added = list(event.messages)
        return named_frames(self.encoder.feed(event))

    def answer(self) -> tuple[int, Json]:
        failure = self.encoder.failure
        if failure is not None:
            return _failure(failure.code, failure.message)
        assert self.encoder.response is not None, "answer() before the turn ended"
        return 200, self.encoder.response

    async def finished(self) -> None:
        response = self.encoder.response
        if response is not None and self.call.store:
            await self.store.save(response, [*self.call.conversation, *self._turn_messages()])

    def _turn_messages(self) -> list[Json]:
        """What this turn added to the conversation, for ``previous_response_id``."""
        messages = list(self._added)
        calls = [item for item in self.encoder.output if item["type"] == "function_call"]
        if calls and not any(m.get("tool_calls") for m in messages):
            # The next request's function_call_output items must find the calls they answer.
            tool_calls = [
                {
                    "id": c["call_id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls
            ]
            messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        if not messages:
            text = "\n\n".join(
                part["text"]
                for item in self.encoder.output
                if item["type"] == "message"
                for part in item["content"]
            )
            if text:
                messages.append({"role": "assistant", "content": text})
        return messages


def _failure(code: str, message: str) -> tuple[int, Json]:
    status = failure_status(code)
    kind = "rate_limit_error" if status == 429 else "server_error"
    return status, error_body(message, type=kind, code=code)


def _error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


Handler = Callable[[Request], Awaitable[Response]]
_ANY = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class ApiSurface:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.config.platforms.api_server
        self.responses = ResponsesStore(runtime.store)
        self.exchanges: set[TurnExchange] = set()  # open, wound down on shutdown
        self._active = 0  # admitted turns, held until their exchange ends
        self._key = (self.settings.api_key or "").encode()

    # -- ServerSurface --------------------------------------------------------------------
    def routes(self) -> list[BaseRoute]:
        # Routes take every method and the last one every /v1 path, so a wrong method or an
        # endpoint Iris lacks is an OpenAI error body too, not Starlette's plain text.
        return [
            Route("/v1/chat/completions", self._guard(self.chat, "POST"), methods=_ANY),
            Route("/v1/responses", self._guard(self.create_response, "POST"), methods=_ANY),
            Route(
                "/v1/responses/{response_id}", self._guard(self.get_response, "GET"), methods=_ANY
            ),
            Route("/v1/models", self._guard(self.models, "GET"), methods=_ANY),
            Route("/v1/{path:path}", self._guard(self.unknown, None), methods=_ANY),
        ]

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        # uvicorn's graceful shutdown gave open replies their time; what is left ends now, as
        # interrupted, and is waited for so every client gets a proper end of its reply.
        open_now = list(self.exchanges)
        for exchange in open_now:
            exchange.interrupt()
        if open_now:
            waits = [asyncio.create_task(exchange.wait_closed()) for exchange in open_now]
            _, pending = await asyncio.wait(waits, timeout=3.0)
            for task in pending:
                task.cancel()

    # -- endpoints ------------------------------------------------------------------------
    def model_names(self) -> list[str]:
        return [self.runtime.agent.model_name or "iris"]

    async def models(self, _: Request) -> Response:
        created = int(time.time())
        data = [
            {"id": name, "object": "model", "created": created, "owned_by": "iris"}
            for name in self.model_names()
        ]
        return JSONResponse({"object": "list", "data": data})

    async def chat(self, request: Request) -> Response:
        body = await self._json(request)
        call = parse_chat(body, models=self.model_names(), config=self.runtime.config)
        return self._exchange(call.turn, ChatWire(call), stream=call.stream)

    async def create_response(self, request: Request) -> Response:
        body = await self._json(request)
        # Read off the loop before parsing; the parser only looks it up.
        previous = body.get("previous_response_id") if isinstance(body, dict) else None
        stored = await self.responses.conversation(previous) if isinstance(previous, str) else None
        call = parse_responses(
            body,
            models=self.model_names(),
            config=self.runtime.config,
            history=lambda response_id: stored if response_id == previous else None,
        )
        return self._exchange(call.turn, ResponsesWire(call, self.responses), stream=call.stream)

    async def unknown(self, request: Request) -> Response:
        raise ApiError(404, f"Iris does not serve {request.url.path}.", code="unknown_url")

    async def get_response(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        found = await self.responses.response(response_id)
        if found is None:
            raise ApiError(
                404, f"No response found with id '{response_id}'.", code="response_not_found"
            )
        return JSONResponse(found)

    # -- the parts every endpoint shares --------------------------------------------------
    def _guard(self, handler: Handler, method: str | None) -> Handler:
        async def guarded(request: Request) -> Response:
            try:
                self._authorize(request)
                if method is not None and request.method != method:
                    raise ApiError(
                        405,
                        f"{request.method} is not allowed here; use {method}.",
                        code="method_not_allowed",
                        headers={"allow": method},
                    )
                return await handler(request)
            except ApiError as error:
                return _error_response(error)
            except StoreUnavailable as exc:
                return _error_response(ApiError(503, exc.message, code=exc.code))

        return guarded

    def _authorize(self, request: Request) -> None:
        if not self._key:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        # Constant-time: the comparison must not tell an attacker how much of a guess matched.
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self._key):
            raise ApiError(
                401,
                "Incorrect API key provided. Send 'Authorization: Bearer <key>'.",
                code="invalid_api_key",
                headers={"www-authenticate": "Bearer"},
            )

    async def _json(self, request: Request) -> object:
        limit = self.settings.max_body_bytes
        too_large = ApiError(
            413, f"The request body is larger than {limit} bytes.", code="request_too_large"
        )
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_large
        raw = bytearray()
        try:
            async for chunk in request.stream():
                raw += chunk
                if len(raw) > limit:
                    raise too_large
        except ClientDisconnect:
            raise bad_request("the client went away while sending the body") from None
        if not raw:
            raise bad_request("the request body is empty; send a JSON object", code="invalid_json")
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise bad_request(
                f"the request body is not valid JSON: {exc}", code="invalid_json"
            ) from None

    def _exchange(self, request: TurnRequest, wire: Wire, *, stream: bool) -> Response:
        limit = self.settings.max_concurrent
        if self._active >= limit:
            raise ApiError(
                429,
                f"Too many concurrent requests: this server runs at most {limit} at once.",
                code="too_many_concurrent_requests",
                headers={"retry-after": "1"},
            )
        self._active += 1
        return TurnExchange(
            self.runtime.agent,
            request,
            wire,
            stream=stream,
            live=self.exchanges,
            release=self._release,
        )

    def _release(self) -> None:
        self._active -= 1

"""The checks every API request passes before any work, in order: the cross-site check
(``Host``, ``Origin``: see ``iris.surfaces.origin``), a CORS preflight answered for listed
origins only, the API key (with the guessing throttle of ``iris.auth_throttle``), the method,
and a JSON ``Content-Type`` for a body. A refusal is an OpenAI error body (``problems``); a
listed origin's answers carry its CORS headers, whatever the handler answered.
"""

from __future__ import annotations

import hmac
import json
import math
from collections.abc import Awaitable, Callable

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from iris.auth_throttle import AuthThrottle, client_address
from iris.errors import StoreUnavailable
from iris.surfaces.api.problems import ApiError, bad_request
from iris.surfaces.origin import SiteGuard

Handler = Callable[[Request], Awaitable[Response]]


class Gate:
    """Wraps each endpoint's handler in the checks (``gate(handler, "POST")``)."""

    def __init__(self, site: SiteGuard, api_key: str | None, throttle: AuthThrottle) -> None:
        self.site = site
        self.throttle = throttle
        self._key = (api_key or "").encode()

    def __call__(self, handler: Handler, method: str | tuple[str, ...] | None) -> Handler:
        """``handler`` behind the checks; ``method``: the methods it takes (None: any)."""
        allowed = (method,) if isinstance(method, str) else method

        async def guarded(request: Request) -> Response:
            cors = self.site.cors_origin(request.headers)
            try:
                # Before any work, the body included: a web page must not get this far.
                self._check_site(request)
                if cors is not None and _is_preflight(request):
                    return _preflight(cors, allowed, request)
                self._authorize(request)
                if allowed is not None and request.method not in allowed:
                    names = ", ".join(allowed)
                    raise ApiError(
                        405,
                        f"{request.method} is not allowed here; use {' or '.join(allowed)}.",
                        code="method_not_allowed",
                        headers={"allow": names},
                    )
                _check_content_type(request)
                response = await handler(request)
            except ApiError as error:
                response = _error_response(error)
            except StoreUnavailable as exc:
                response = _error_response(ApiError(503, exc.message, code=exc.code))
            return response if cors is None else _WithHeaders(response, _cors_headers(cors))

        return guarded

    def _check_site(self, request: Request) -> None:
        scope = request.scope
        refusal = self.site.refusal(request.headers, scope.get("server"), scope["scheme"])
        if refusal is not None:
            raise ApiError(403, refusal.message, code=refusal.code, type="permission_error")

    def _authorize(self, request: Request) -> None:
        if not self._key:
            return
        guard, address = self.throttle, client_address(request.scope)
        wait = guard.refused(address, "api")
        if wait is not None:  # guessing: too many wrong keys from this address (iris.auth_throttle)
            raise ApiError(
                429,
                "Too many failed authentications from this address; retry later.",
                code="too_many_failed_authentications",
                type="rate_limit_error",
                headers={"retry-after": str(math.ceil(wait))},
            )
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        # Constant-time: the comparison must not tell an attacker how much of a guess matched.
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self._key):
            guard.failed(address, "api")
            raise ApiError(
                401,
                "Incorrect API key provided. Send 'Authorization: Bearer <key>'.",
                code="invalid_api_key",
                headers={"www-authenticate": "Bearer"},
            )


async def read_json(request: Request) -> object:
    """The request's body as JSON, or a 400."""
    # The body's deadline (408) and size cap (413) are the server's ``BodyGuard``: one
    # place, so no route can forget them.
    raw = bytearray()
    try:
        async for chunk in request.stream():
            raw += chunk
    except ClientDisconnect:
        raise bad_request("the client went away while sending the body") from None
    if not raw:
        raise bad_request("the request body is empty; send a JSON object", code="invalid_json")
    try:
        return json.loads(raw)
    except RecursionError:
        raise bad_request("the request body is nested too deeply", code="invalid_json") from None
    except ValueError as exc:
        raise bad_request(
            f"the request body is not valid JSON: {exc}", code="invalid_json"
        ) from None


def _error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


_JSON_TYPES = ("application/json",)


def _check_content_type(request: Request) -> None:
    """A body must say it is JSON: a browser sends text/plain and form posts cross-site
    without asking first (no CORS preflight), so those never reach a handler."""
    if request.method not in ("POST", "PUT", "PATCH"):
        return
    length = request.headers.get("content-length")
    if length is None and "transfer-encoding" not in request.headers:
        return
    if length is not None and length.strip() == "0":
        return
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media in _JSON_TYPES or (media.startswith("application/") and media.endswith("+json")):
        return
    raise ApiError(
        415,
        f"Send the body as JSON with 'Content-Type: application/json' (got {media or 'none'!r}).",
        code="unsupported_media_type",
    )


def _is_preflight(request: Request) -> bool:
    return request.method == "OPTIONS" and "access-control-request-method" in request.headers


def _preflight(origin: str, methods: tuple[str, ...] | None, request: Request) -> Response:
    headers = _cors_headers(origin)
    allowed = ", ".join(methods) if methods else "GET, POST"
    headers["access-control-allow-methods"] = f"{allowed}, OPTIONS" if methods else allowed
    asked = request.headers.get("access-control-request-headers")
    # The SDKs send their own x-stainless-* headers; a listed origin may send what it asks.
    headers["access-control-allow-headers"] = asked or "authorization, content-type"
    headers["access-control-max-age"] = "600"
    return Response(status_code=204, headers=headers)


def _cors_headers(origin: str) -> dict[str, str]:
    return {
        "access-control-allow-origin": origin,
        "access-control-expose-headers": "retry-after, retry-after-ms",
        "vary": "Origin",
    }


class _WithHeaders(Response):
    """Another response with extra headers (CORS) added to whatever head it sends; the turn
    exchanges write their own heads, so the headers go in at the ASGI level."""

    def __init__(self, inner: Response, headers: dict[str, str]) -> None:
        super().__init__()
        self.inner = inner
        self.extra = [(k.encode(), v.encode()) for k, v in headers.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.extra]}
            await send(message)

        await self.inner(scope, receive, send_with)

"""The JSON refusals of the authenticated routes beside the API (``/iris/chats``, ``/mcp``,
``/a2a``): the API's error shape (``{"error": {message, type, param, code}}``), never cached."""

from __future__ import annotations

import math

from starlette.responses import JSONResponse

from iris.surfaces.api.problems import error_body

PRIVATE = {"cache-control": "no-store"}  # transcripts, tasks: no cache keeps a copy


def refusal(
    status: int, message: str, code: str, type: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = error_body(message, type=type, code=code)
    return JSONResponse(body, status_code=status, headers={**PRIVATE, **(headers or {})})


def throttled(wait: float) -> JSONResponse:
    """429: this address sent too many wrong secrets (``iris.auth_throttle``)."""
    return refusal(
        429,
        "Too many failed authentications from this address; retry later.",
        "too_many_failed_authentications",
        "rate_limit_error",
        {"retry-after": str(math.ceil(wait))},
    )


def unauthorized(code: str, message: str) -> JSONResponse:
    """401 with ``WWW-Authenticate: Bearer``."""
    return refusal(401, message, code, "authentication_error", {"www-authenticate": "Bearer"})

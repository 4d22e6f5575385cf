"""OpenAI-style errors: the one shape every failure of the API surface takes.

Before the first byte a failure is an HTTP status with ``{"error": {message, type, param,
code}}``; after it, the encoders put the same object in-band. ``failure_status`` decides the
status a failed turn maps to when the client did not stream.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request we answer with a 4xx/5xx and an OpenAI error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.type = type or _type_for(status)
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, type=self.type, code=self.code, param=self.param)


def error_body(
    message: str, *, type: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _type_for(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def failure_status(code: str) -> int:
    """The HTTP status of a non-streamed turn that failed with ``TurnFailed.code``.

    The upstream's own auth or request problems are ours to report as a bad gateway: the
    client's credentials for Iris were fine."""
    return 429 if code == "rate_limited" else 502


def bad_request(
    message: str, *, param: str | None = None, code: str = "invalid_request"
) -> ApiError:
    return ApiError(400, message, param=param, code=code)

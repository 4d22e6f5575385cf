"""What a provider is: a request in, a stream of raw deltas out, errors translated.

Each provider file (``chat_completions``, ``responses``, ``local``) only parses its own wire
format into these raw deltas; the agent's ``RoundBuilder`` turns them into events.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import openai

from iris.errors import (
    ProviderBadResponse,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeout,
    StreamingRejected,
)


def _both(name: str) -> tuple[type[Exception], ...]:
    """``httpx.<name>`` and, where installed, ``httpx2.<name>``: newer openai SDKs run on
    httpx2, and a dropped stream surfaces as that library's transport error."""
    found: list[type[Exception]] = [getattr(httpx, name)]
    try:
        import httpx2

        found.append(getattr(httpx2, name))
    except ImportError:  # pragma: no cover - depends on the installed SDK
        pass
    return tuple(found)


_TIMEOUT = _both("TimeoutException")
_TRANSPORT = _both("TransportError") + _both("StreamError")
_CONNECT = _both("ConnectError")
_LOST = _both("RemoteProtocolError") + _both("ReadError")


@dataclass(frozen=True, slots=True)
class RawText:
    text: str


@dataclass(frozen=True, slots=True)
class RawReasoning:
    text: str
    summary: bool = False  # a summary of the reasoning, not the raw text


@dataclass(frozen=True, slots=True)
class RawToolCall:
    """A tool-call fragment. ``index`` identifies the call within the round; ``id`` and
    ``name`` arrive once; ``arguments`` are concatenated, or replace what came before when
    ``complete`` (a provider that reports the whole call at the end)."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""
    complete: bool = False


@dataclass(frozen=True, slots=True)
class RawUsage:
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class RawLimit:
    """The provider stopped the reply at its token limit (``max_tokens``), not at its end: the
    turn ends with ``length`` (``finish_reason: length``, an incomplete response)."""


RawDelta = RawText | RawReasoning | RawToolCall | RawUsage | RawLimit


@dataclass
class ProviderRequest:
    model: str
    messages: list[dict[str, Any]]  # chat format, system message first when there is one
    tools: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])  # chat format
    max_tokens: int | None = None
    # Generation parameters, neutral spelling (``iris.llm.params``); each provider maps them.
    params: dict[str, Any] = field(default_factory=dict[str, Any])
    # Chat Completions' spelling of the limit (the client's): reasoning models take only
    # ``max_completion_tokens``, older servers only ``max_tokens``.
    max_tokens_field: str = "max_tokens"


class Provider(Protocol):
    name: str  # the model name, as shown to users

    def stream(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        """Stream the answer as it is produced. Raises ``ProviderError`` subclasses."""
        ...

    def complete(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        """Ask without streaming; the whole answer arrives as a few raw deltas at once."""
        ...

    async def aclose(self) -> None: ...


_STREAM_WORDS = ("stream", "streaming")


@contextlib.contextmanager
def translate_errors(*, streaming: bool) -> Generator[None]:
    """Turn SDK / transport exceptions into the ``ProviderError`` tree."""
    try:
        yield
    except ProviderError:
        raise
    except openai.APIStatusError as exc:
        raise _http_error(exc, streaming=streaming) from None
    except openai.APITimeoutError:
        raise timed_out() from None
    except openai.APIConnectionError as exc:
        raise ProviderConnectionError(_connection_message(exc)) from None
    except _TIMEOUT:
        raise timed_out() from None
    except json.JSONDecodeError:
        # The SDK parses a non-streamed body as JSON whenever the content type says so.
        raise bad_response("its body is not valid JSON") from None
    except _TRANSPORT as exc:
        # Raised mid-stream when the connection drops (not wrapped by the SDK while iterating).
        raise ProviderConnectionError(
            f"connection to the provider lost: {type(exc).__name__}"
        ) from None
    except openai.APIError as exc:
        # e.g. an in-band error event in a stream
        raise ProviderError(f"provider error: {exc.message}") from None


def timed_out(seconds: float | None = None) -> ProviderTimeout:
    within = f" within {seconds:g} s" if seconds is not None else " in time"
    return ProviderTimeout(f"the provider timed out: nothing arrived{within}")


def bad_response(why: str) -> ProviderBadResponse:
    return ProviderBadResponse(f"the provider answered 200 but not with the API's answer: {why}")


def describe_body(body: str) -> str:
    """What a body that should have been the API's answer looked like, for the message."""
    stripped = body.strip()
    if not stripped:
        return "the body is empty"
    if stripped[:1] == "<":
        return "the body is an HTML page (a proxy or gateway in the way?)"
    return f"the body starts with {stripped[:40]!r}"


def _connection_message(exc: openai.APIConnectionError) -> str:
    cause = exc.__cause__
    if isinstance(cause, _CONNECT):
        return "cannot reach the provider (connection refused or unknown host)"
    if isinstance(cause, _LOST):
        return "connection to the provider lost mid-response"
    return "cannot reach the provider"


def _http_error(exc: openai.APIStatusError, *, streaming: bool) -> ProviderError:
    status = exc.status_code
    message = _error_text(exc)
    retry_after = _retry_after(exc.response)
    body = ""
    with contextlib.suppress(Exception):
        body = exc.response.text
    if streaming and status in (400, 422, 501) and any(w in message.lower() for w in _STREAM_WORDS):
        return StreamingRejected(f"the provider rejected streaming: {message}")
    prefix = {
        401: "the provider rejected the API key (401)",
        403: "the provider refused access (403)",
        404: "the provider does not know this model or path (404)",
        429: "the provider is rate limiting (429)",
    }.get(status, f"the provider answered HTTP {status}")
    return ProviderHTTPError(
        status, f"{prefix}: {message}" if message else prefix, body, retry_after
    )


def _error_text(exc: openai.APIStatusError) -> str:
    body: Any = exc.body
    if isinstance(body, dict):
        inner: Any = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])[:300]
        if isinstance(inner, str):
            return inner[:300]
    return str(exc.message)[:300]


def _retry_after(response: Any) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None

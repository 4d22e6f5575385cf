"""The upstream HTTP request: its JSON body built and encoded, then posted through the SDK's
low-level ``post`` (same auth, timeouts and error translation).

The SDK's typed ``create()`` transforms its params message by message on the event loop:
3.9 s for a 20 000-message conversation on this machine, during which the whole server stood
still. Posting pre-encoded bytes skips that transform; a large request's encoding runs in a
worker thread, a small one's on the loop (the thread's hop would cost more than its JSON).

``SdkProvider`` is what both providers built on the SDK share: the client made from the
endpoint, the model listing's context window, and closing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
from collections.abc import AsyncGenerator, Callable
from typing import Any, TypeVar, cast

import httpx
import openai

from iris.config import ModelEndpoint
from iris.llm.provider import ProviderRequest

Body = dict[str, Any]
T = TypeVar("T")

# The header the SDK's ``with_streaming_response`` sets: the response body is left unread.
_RAW_STREAM = {"X-Stainless-Raw-Response": "stream"}


@functools.cache
def _bytes_keyword() -> str:
    """Newer SDKs take encoded bytes as ``content`` (and deprecate bytes as ``body``); older
    ones (2.0 here) send bytes given as ``body`` unchanged."""
    accepts = inspect.signature(openai.AsyncOpenAI.post).parameters
    return "content" if "content" in accepts else "body"


def _send(body: bytes) -> dict[str, Any]:
    return {_bytes_keyword(): body}


# A request within these is encoded on the event loop: a worker thread's hop (waking it, the
# GIL passed back and forth) costs more than its JSON (tens of µs).
_INLINE_ITEMS = 32  # messages, and tools
_INLINE_CHARS = 32 * 1024  # of message text and tool-call arguments


async def encode(build: Callable[[], Body], request: ProviderRequest) -> bytes:
    """``build()`` and its JSON: on the loop for a small request, else in a worker thread."""
    if _small(request):
        return json.dumps(build()).encode()
    return await asyncio.to_thread(lambda: json.dumps(build()).encode())


def _small(request: ProviderRequest) -> bool:
    if len(request.messages) > _INLINE_ITEMS or len(request.tools) > _INLINE_ITEMS:
        return False
    chars = 0
    for message in request.messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif content is not None:
            return False  # parts (images, files): their data may be large
        for call in message.get("tool_calls") or ():
            chars += len(str(call.get("function", {}).get("arguments", "")))
    return chars <= _INLINE_CHARS


async def post(client: openai.AsyncOpenAI, path: str, body: bytes, cast_to: type[T]) -> T:
    """POST and parse the whole answer as ``cast_to`` (an SDK model)."""
    return await client.post(path, cast_to=cast_to, **_send(body))


@contextlib.asynccontextmanager
async def post_raw_stream(
    client: openai.AsyncOpenAI, path: str, body: bytes
) -> AsyncGenerator[openai.AsyncAPIResponse[object]]:
    """POST and hand over the unread response (its body: ``iris.llm.sse_lines``); closed on exit."""
    response = cast(
        "openai.AsyncAPIResponse[object]",
        await client.post(path, cast_to=object, options={"headers": _RAW_STREAM}, **_send(body)),
    )
    try:
        yield response
    finally:
        await response.close()


# What model listings call a model's context window: OpenRouter ``context_length``, vLLM
# ``max_model_len``, LM Studio ``max_context_length``, others ``context_window`` /
# ``max_input_tokens``. OpenAI's own listing says none of them.
_WINDOW_FIELDS = (
    "context_window",
    "context_length",
    "max_model_len",
    "max_context_length",
    "max_input_tokens",
)


def make_client(endpoint: ModelEndpoint) -> openai.AsyncOpenAI:
    # The agent owns retries and fallback; the SDK's own retries would hide 429/5xx from it.
    return openai.AsyncOpenAI(
        base_url=endpoint.base_url,
        api_key=endpoint.resolved_api_key(),
        max_retries=0,
        timeout=endpoint.timeout,
        http_client=_http_client(),
    )


def _http_client() -> Any:
    """The SDK's own default client on ``PlainTransport`` (plain HTTP kept alive, the rest
    through httpx's transport with the SDK's limits); None (the SDK's default) for an SDK
    that does not run on httpx2, or where the environment names a proxy (httpx honours
    ``HTTP_PROXY`` and the like only on a client of its own transport)."""
    import urllib.request

    import httpx2

    from iris.llm.plain_http import PlainTransport

    if urllib.request.getproxies():
        return None
    if not issubclass(openai.DefaultAsyncHttpxClient, httpx2.AsyncClient):  # pyright: ignore[reportUnnecessaryIsInstance]
        return None  # pragma: no cover - depends on the installed SDK
    limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
    fallback = httpx2.AsyncHTTPTransport(limits=limits)
    return openai.DefaultAsyncHttpxClient(transport=PlainTransport(fallback))


class SdkProvider:
    """What both ``openai`` SDK providers are besides their wire format: the endpoint's name,
    one SDK client, the context window its model listing reports, and closing the client."""

    def __init__(
        self, endpoint: ModelEndpoint, *, client: openai.AsyncOpenAI | None = None
    ) -> None:
        """``client``: an SDK client of one's own (tests give one on an ``httpx`` mock
        transport); by default one made from ``endpoint``."""
        self.name = endpoint.name
        self._client = client or make_client(endpoint)

    async def listed_window(self, model: str) -> int | None:
        """The context window ``GET /models`` reports for ``model``, or None when it says none
        (or cannot be read: the listing is a hint, never a reason for a turn to fail)."""
        try:
            listing: Any = await self._client.get(
                "/models", cast_to=object, options={"timeout": 3.0}
            )
        except (openai.APIError, httpx.HTTPError, ValueError):
            return None
        entries = listing.get("data") if isinstance(listing, dict) else None
        for entry in cast(list[Any], entries) if isinstance(entries, list) else []:
            if not isinstance(entry, dict) or entry.get("id") != model:
                continue
            for name in _WINDOW_FIELDS:
                value = entry.get(name)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value
        return None

    async def aclose(self) -> None:
        await self._client.close()

"""Chat Completions through the official ``openai`` SDK, against any compatible ``base_url``."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletion

from iris.config import ModelEndpoint
from iris.errors import ProviderConnectionError, ProviderError, ProviderHTTPError
from iris.llm.provider import (
    ProviderRequest,
    RawDelta,
    RawReasoning,
    RawText,
    RawToolCall,
    RawUsage,
    bad_response,
    describe_body,
    translate_errors,
)
from iris.llm.quirks import ModelQuirks
from iris.llm.socket_body import body_of
from iris.llm.sse_lines import line_batches, loads_object
from iris.llm.wire import SdkProvider, encode, post, post_raw_stream

_STREAM = {"stream": True, "stream_options": {"include_usage": True}}


class ChatCompletionsProvider(SdkProvider):
    def __init__(
        self, endpoint: ModelEndpoint, *, client: openai.AsyncOpenAI | None = None
    ) -> None:
        super().__init__(endpoint, client=client)
        self._preset = dict(endpoint.extra_params.set)  # model.extra_params.set
        self.quirks = ModelQuirks()  # what each model refused, learned from its 400s

    def _body(self, request: ProviderRequest, extra: dict[str, Any]) -> dict[str, Any]:
        body = {**request_body(request, self._preset), **extra}
        return self.quirks.adjust(request.model, body)

    async def stream(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        # The SDK's raw-response mode: same client, auth, errors and connection handling, but
        # chunks are read as JSON dicts. Building an SDK model per chunk cost ~300 µs on this
        # machine and dominated a busy server's per-chunk delay (bench/api_overhead.py).
        while True:
            body = await encode(lambda: self._body(request, _STREAM))
            started = False
            try:
                with translate_errors(streaming=True):
                    async with post_raw_stream(self._client, "/chat/completions", body) as response:
                        async for raw in _stream_deltas(
                            line_batches(body_of(response.http_response))
                        ):
                            started = True
                            yield raw
                return
            except ProviderHTTPError as exc:
                # Refused before the first byte: again, as the model takes it (``quirks``).
                if started or not self.quirks.learn(request.model, self._body(request, {}), exc):
                    raise

    async def complete(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        while True:
            body = await encode(lambda: self._body(request, {}))
            try:
                with translate_errors(streaming=False):
                    response: Any = await post(
                        self._client, "/chat/completions", body, ChatCompletion
                    )
                break
            except ProviderHTTPError as exc:
                if not self.quirks.learn(request.model, self._body(request, {}), exc):
                    raise
        if isinstance(response, str):  # the SDK's answer for a body that is not JSON
            raise bad_response(describe_body(response))
        if not isinstance(getattr(response, "choices", None), list):
            error = getattr(response, "error", None)  # some providers answer 200 + an error
            if isinstance(error, dict) and error.get("message"):
                raise ProviderError(f"provider error: {str(error['message'])[:300]}")
            raise bad_response("the JSON has no 'choices'")
        if response.usage is not None:
            yield RawUsage(response.usage.prompt_tokens or 0, response.usage.completion_tokens or 0)
        if not response.choices:
            return
        message = response.choices[0].message
        reasoning = _reasoning_of(message)
        if reasoning:
            yield RawReasoning(reasoning)
        if message.content:
            yield RawText(message.content)
        for index, call in enumerate(message.tool_calls or ()):
            function = getattr(call, "function", None)
            if function is None:
                continue
            yield RawToolCall(
                index=index,
                id=call.id,
                name=function.name,
                arguments=function.arguments or "",
                complete=True,
            )


def request_body(request: ProviderRequest, preset: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Chat Completions request body (without the streaming fields). ``preset``: the
    endpoint's ``extra_params.set``, under the request's own values."""
    body: dict[str, Any] = {"model": request.model, "messages": request.messages}
    if request.tools:
        body["tools"] = request.tools
    if request.max_tokens:
        body[request.max_tokens_field] = request.max_tokens
    for name, value in (preset or {}).items():
        body.setdefault(name, value)
    for name, value in request.params.items():
        if name == "metadata":
            continue  # OpenAI takes it only with ``store``, and Iris stores nothing there
        if name == "response_format":
            body[name] = _response_format(value)
        elif name == "tool_choice" and isinstance(value, dict):
            body[name] = {"type": "function", "function": {"name": value["name"]}}
        elif name not in _TOOL_ONLY or request.tools:
            body[name] = value
    return body


# Meaningless in a round without tools, and OpenAI rejects them there.
_TOOL_ONLY = frozenset({"tool_choice", "parallel_tool_calls"})


def _response_format(flat: dict[str, Any]) -> dict[str, Any]:
    if flat["type"] != "json_schema":
        return dict(flat)
    spec = {k: v for k, v in flat.items() if k != "type"}
    return {"type": "json_schema", "json_schema": spec}


_SSE_FIELDS = ("data", "event", "id", "retry", ":")


async def _stream_deltas(batches: AsyncIterator[list[str]]) -> AsyncGenerator[RawDelta]:
    """Raw deltas of an SSE body (its lines, a read's worth at a time). A body that is not
    SSE is a bad response; a stream that stops without ``[DONE]`` or a ``finish_reason`` was
    cut, not finished."""
    data: list[str] = []
    chunks = 0
    finished = False
    first = ""
    async for lines in batches:
        first = first or next(filter(None, lines), "")
        for line in lines:
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
                continue
            if line and not chunks and not line.startswith(_SSE_FIELDS):
                raise bad_response(describe_body(line))  # an HTML page, plain text...
            if line or not data:
                continue  # comments, other fields, keep-alives
            payload, data = "\n".join(data), []
            if payload == "[DONE]":
                return
            chunk = loads_object(payload)
            chunks += 1
            finished = finished or _finishes(chunk)
            for raw in _chunk_deltas(chunk):
                yield raw
    if finished:
        return
    if not chunks:
        raise bad_response(describe_body(first))
    raise ProviderConnectionError(
        "connection to the provider lost mid-response (the stream ended without [DONE])"
    )


def _finishes(chunk: dict[str, Any]) -> bool:
    choices = chunk.get("choices")
    return isinstance(choices, list) and any(
        isinstance(c, dict) and c.get("finish_reason") for c in cast(list[Any], choices)
    )


def _chunk_deltas(chunk: dict[str, Any]) -> list[RawDelta]:
    """Raw deltas of one ``chat.completion.chunk`` (as a dict)."""
    if "error" in chunk:  # an in-band error after the 200
        error = chunk["error"]
        message = error.get("message") if isinstance(error, dict) else str(error)
        raise ProviderError(f"provider error: {message or 'the stream failed'}")
    out: list[RawDelta] = []
    usage = chunk.get("usage")
    if usage:
        out.append(RawUsage(usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0))
    choices = chunk.get("choices") or []
    if not choices:
        return out
    delta = choices[0].get("delta") or {}
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        out.append(RawReasoning(reasoning))
    content = delta.get("content")
    if isinstance(content, str) and content:
        out.append(RawText(content))
    for call in delta.get("tool_calls") or ():
        function = call.get("function") or {}
        out.append(
            RawToolCall(
                index=int(call.get("index") or 0),
                id=call.get("id") or "",
                name=function.get("name") or "",
                arguments=function.get("arguments") or "",
            )
        )
    return out


def _reasoning_of(obj: Any) -> str:
    """``reasoning_content`` (DeepSeek, vLLM) or ``reasoning`` (OpenRouter, Ollama): SDK extras."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(obj, name, None)
        if isinstance(value, str) and value:
            return value
    return ""

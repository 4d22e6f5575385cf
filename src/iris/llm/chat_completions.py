"""Chat Completions through the official ``openai`` SDK, against any compatible ``base_url``.

The SDK makes the request (auth, headers, status errors before the body); a streamed body is
parsed here by ``ChatChunks``, fed one network read at a time by ``stream()``, the one async
generator between the socket and the agent.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

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
from iris.llm.sse_lines import SseData, loads_object
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
        # the body is read here (``iris.llm.sse_lines``): building an SDK model per chunk cost
        # ~300 µs on this machine and dominated a busy server's per-chunk delay.
        while True:
            body = await encode(lambda: self._body(request, _STREAM), request)
            started = False
            try:
                with translate_errors(streaming=True):
                    async with post_raw_stream(self._client, "/chat/completions", body) as response:
                        reader = body_of(response.http_response)
                        chunks = ChatChunks()
                        while data := await reader.read():
                            started = True
                            for raw in chunks.feed(data):
                                yield raw
                            if chunks.over:
                                reader.over()
                                break
                        for raw in chunks.end():
                            yield raw
                        chunks.close()
                return
            except ProviderHTTPError as exc:
                # Refused before the first byte: again, as the model takes it (``quirks``).
                if started or not self.quirks.learn(request.model, self._body(request, {}), exc):
                    raise

    async def complete(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        while True:
            body = await encode(lambda: self._body(request, {}), request)
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


class ChatChunks:
    """A Chat Completions SSE body, a network read at a time: ``feed`` gives the raw deltas of
    the chunks a read completes, ``end`` those the body's last byte completes, ``close`` says
    how the body ended. A body that is not SSE is a bad response; one that stops without
    ``[DONE]`` or a ``finish_reason`` was cut, not finished. An error (in-band, a malformed
    chunk, a body that is not SSE) comes after the deltas before it: ``feed`` keeps it and
    sets ``over``, and ``close`` raises it."""

    def __init__(self) -> None:
        self._sse = SseData(strict=True)
        self._error: ProviderError | None = None
        self.chunks = 0
        self.finished = False  # a finish_reason came
        self.over = False  # [DONE] or an error: read no further

    def feed(self, data: bytes) -> list[RawDelta]:
        return self._deltas(self._sse.feed(data))

    def end(self) -> list[RawDelta]:
        """At the body's end: the deltas of an event its last byte ends (none once ``over``)."""
        return [] if self.over else self._deltas(self._sse.end())

    def close(self) -> None:
        """After ``end``: the held error, or why the body's end is not the answer's."""
        if self._error is not None:
            raise self._error
        if self.over or self.finished:
            return
        if not self.chunks:
            raise bad_response(describe_body(self._sse.first))
        raise ProviderConnectionError(
            "connection to the provider lost mid-response (the stream ended without [DONE])"
        )

    def _deltas(self, payloads: list[str]) -> list[RawDelta]:
        out: list[RawDelta] = []
        try:
            for payload in payloads:
                if payload == "[DONE]":
                    self.over = True
                    return out
                self.chunks += 1
                if _chunk_deltas(loads_object(payload), out):
                    self.finished = True
            if self._sse.not_sse is not None:
                raise bad_response(describe_body(self._sse.not_sse))  # an HTML page...
        except ProviderError as exc:
            self._error = exc
            self.over = True
        return out


def _chunk_deltas(chunk: dict[str, Any], out: list[RawDelta]) -> bool:
    """Raw deltas of one ``chat.completion.chunk`` (as a dict), added to ``out``; whether a
    choice in it finished."""
    if "error" in chunk:  # an in-band error after the 200
        error = chunk["error"]
        message = error.get("message") if isinstance(error, dict) else str(error)
        raise ProviderError(f"provider error: {message or 'the stream failed'}")
    usage = chunk.get("usage")
    if usage:
        out.append(RawUsage(usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0))
    choices: list[Any] | Any = chunk.get("choices")
    if not choices or not isinstance(choices, list):
        return False
    first: dict[str, Any] | Any = choices[0]
    if not isinstance(first, dict):
        raise ProviderError("the provider sent a malformed stream chunk")
    delta: dict[str, Any] | Any = first.get("delta")
    if delta and isinstance(delta, dict):
        if len(delta) == 1 and "content" in delta:  # the usual chunk: text alone
            content = delta["content"]
            if content and isinstance(content, str):
                out.append(RawText(content))
        else:
            _delta_parts(delta, out)
    if first.get("finish_reason"):
        return True
    # Only ``n`` > 1 has choices past the first.
    return len(choices) > 1 and any(
        isinstance(c, dict) and c.get("finish_reason") for c in choices[1:]
    )


def _delta_parts(delta: dict[str, Any], out: list[RawDelta]) -> None:
    """A choice's ``delta``: reasoning, text, tool-call fragments, in that order."""
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if reasoning and isinstance(reasoning, str):
        out.append(RawReasoning(reasoning))
    content = delta.get("content")
    if content and isinstance(content, str):
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


def _reasoning_of(obj: Any) -> str:
    """``reasoning_content`` (DeepSeek, vLLM) or ``reasoning`` (OpenRouter, Ollama): SDK extras."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(obj, name, None)
        if isinstance(value, str) and value:
            return value
    return ""

"""Chat Completions through the official ``openai`` SDK, against any compatible ``base_url``."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import openai

from iris.config import ModelEndpoint
from iris.llm.base import (
    ProviderRequest,
    RawDelta,
    RawReasoning,
    RawText,
    RawToolCall,
    RawUsage,
    translate_errors,
)


def make_client(endpoint: ModelEndpoint) -> openai.AsyncOpenAI:
    # The agent owns retries and fallback; the SDK's own retries would hide 429/5xx from it.
    return openai.AsyncOpenAI(
        base_url=endpoint.base_url,
        api_key=endpoint.resolved_api_key(),
        max_retries=0,
        timeout=endpoint.timeout,
    )


class ChatCompletionsProvider:
    def __init__(self, endpoint: ModelEndpoint) -> None:
        self.name = endpoint.name
        self._client = make_client(endpoint)

    def _kwargs(self, request: ProviderRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": request.model, "messages": request.messages}
        if request.tools:
            kwargs["tools"] = request.tools
        if request.max_tokens:
            kwargs["max_tokens"] = request.max_tokens
        return kwargs

    async def stream(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        with translate_errors(streaming=True):
            stream = await self._client.chat.completions.create(
                **self._kwargs(request), stream=True, stream_options={"include_usage": True}
            )
            # Closing the stream (also on cancellation) closes the upstream HTTP response.
            async with stream:
                async for chunk in stream:
                    if chunk.usage is not None:
                        yield RawUsage(
                            chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0
                        )
                    if not chunk.choices:
                        continue
                    delta = chunk.choices[0].delta
                    reasoning = _reasoning_of(delta)
                    if reasoning:
                        yield RawReasoning(reasoning)
                    if delta.content:
                        yield RawText(delta.content)
                    for call in delta.tool_calls or ():
                        function = call.function
                        yield RawToolCall(
                            index=call.index,
                            id=call.id or "",
                            name=(function.name or "") if function else "",
                            arguments=(function.arguments or "") if function else "",
                        )

    async def complete(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        with translate_errors(streaming=False):
            response = await self._client.chat.completions.create(**self._kwargs(request))
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

    async def aclose(self) -> None:
        await self._client.close()


def _reasoning_of(obj: Any) -> str:
    """``reasoning_content`` (DeepSeek, vLLM) or ``reasoning`` (OpenRouter, Ollama): SDK extras."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(obj, name, None)
        if isinstance(value, str) and value:
            return value
    return ""

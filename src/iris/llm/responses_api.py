"""The Responses API (``model.provider: responses``) through the official ``openai`` SDK.

The agent speaks chat-format messages; this file maps them to Responses input items and maps
the Responses event stream back to raw deltas (``ResponseEvents``, fed the body a network read
at a time). The final tool calls are taken from ``response.output_item.done`` items, which
carry the complete arguments.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any, cast

from openai.types.responses import Response

from iris.errors import ProviderConnectionError, ProviderError
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
from iris.llm.socket_body import body_of
from iris.llm.sse_lines import SseData, loads_object
from iris.llm.wire import SdkProvider, encode, post, post_raw_stream


def to_input_items(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """(instructions, input items) for chat-format ``messages``."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            instructions.append(_text_of(content))
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id", ""),
                    "output": _text_of(content),
                }
            )
        elif role == "assistant":
            if content:
                items.append({"role": "assistant", "content": _text_of(content)})
            for call in message.get("tool_calls") or ():
                function = call.get("function", {})
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.get("id", ""),
                        "name": function.get("name", ""),
                        "arguments": function.get("arguments", ""),
                    }
                )
        else:
            items.append({"role": "user", "content": _user_content(content)})
    return ("\n\n".join(instructions) or None), items


def _user_content(content: Any) -> Any:
    """A user message's content in the Responses spelling: chat-format content parts
    (``text``, ``image_url``) become ``input_text`` / ``input_image``."""
    if not isinstance(content, list):
        return content if content is not None else ""
    parts: list[dict[str, Any]] = []
    for part in cast(list[Any], content):
        if not isinstance(part, dict):
            continue
        part = cast(dict[str, Any], part)
        if part.get("type") == "text":
            parts.append({"type": "input_text", "text": part.get("text", "")})
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url", "") if isinstance(image, dict) else image
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
        else:
            parts.append(part)  # already in the Responses spelling
    return parts


def to_response_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    converted: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function", tool)
        converted.append(
            {
                "type": "function",
                "name": function.get("name", ""),
                "description": function.get("description", ""),
                "parameters": function.get("parameters", {"type": "object", "properties": {}}),
            }
        )
    return converted


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return "" if content is None else json.dumps(content)


class ResponsesProvider(SdkProvider):
    async def stream(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        body = await encode(lambda: {**request_body(request), "stream": True}, request)
        with translate_errors(streaming=True):
            async with post_raw_stream(self._client, "/responses", body) as response:
                reader = body_of(response.http_response)
                events = ResponseEvents()
                while data := await reader.read():
                    for raw in events.feed(data):
                        yield raw
                    if events.over:
                        reader.over()
                        break
                for raw in events.end():
                    yield raw
                events.close(response.http_response.headers.get("content-type"))

    async def complete(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        body = await encode(lambda: request_body(request), request)
        with translate_errors(streaming=False):
            response: Any = await post(self._client, "/responses", body, Response)
        if isinstance(response, str):  # the SDK's answer for a body that is not JSON
            raise bad_response(describe_body(response))
        data: dict[str, Any] = response.model_dump()
        if not isinstance(data.get("output"), list):
            raise bad_response("the JSON has no 'output'")
        for index, item in enumerate(data.get("output") or []):
            for raw in _item_deltas(item, index, with_text=True, with_reasoning=True):
                yield raw
        usage = data.get("usage") or {}
        yield RawUsage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0))


def request_body(request: ProviderRequest) -> dict[str, Any]:
    """The Responses request body (without ``stream``)."""
    instructions, items = to_input_items(request.messages)
    body: dict[str, Any] = {"model": request.model, "input": items, "store": False}
    if instructions:
        body["instructions"] = instructions
    if request.tools:
        body["tools"] = to_response_tools(request.tools)
    if request.max_tokens:
        body["max_output_tokens"] = request.max_tokens
    reasoning: dict[str, Any] = {}
    text: dict[str, Any] = {}
    for name, value in request.params.items():
        if name == "response_format":
            text["format"] = value
        elif name == "verbosity":
            text["verbosity"] = value
        elif name == "reasoning_effort":
            reasoning["effort"] = value
        elif name == "reasoning_summary":
            reasoning["summary"] = value
        elif name not in ("tool_choice", "parallel_tool_calls") or request.tools:
            body[name] = value  # the flat tool_choice is already the Responses spelling
    if text:
        body["text"] = text
    if reasoning:
        body["reasoning"] = reasoning
    return body


def _item_deltas(
    item: dict[str, Any], index: int, *, with_text: bool, with_reasoning: bool
) -> list[RawDelta]:
    kind = item.get("type")
    if kind == "function_call":
        return [
            RawToolCall(
                index,
                item.get("call_id", ""),
                item.get("name", ""),
                item.get("arguments") or "",
                complete=True,
            )
        ]
    if kind == "message" and with_text:
        text = "".join(
            part.get("text", "")
            for part in item.get("content") or []
            if part.get("type") == "output_text"
        )
        return [RawText(text)] if text else []
    if kind == "reasoning" and with_reasoning:
        raw = "".join(part.get("text", "") for part in item.get("content") or [])
        summary = "".join(part.get("text", "") for part in item.get("summary") or [])
        deltas: list[RawDelta] = [RawReasoning(raw)] if raw else []
        return [*deltas, RawReasoning(summary, summary=True)] if summary else deltas
    return []


def _failure_text(data: dict[str, Any]) -> str:
    error = data.get("error") or (data.get("response") or {}).get("error") or {}
    if isinstance(error, dict):
        return str(error.get("message") or data.get("message") or "the response failed")
    return str(data.get("message") or "the response failed")


def _event_object(payload: str) -> dict[str, Any]:
    """One event's JSON; an ``error`` in it fails the stream, as the SDK's reader does."""
    data = loads_object(payload)
    error = data.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            message = "An error occurred during streaming"
        raise ProviderError(f"provider error: {message}")
    return data


class ResponseEvents:
    """A Responses SSE body, a network read at a time: ``feed`` gives the raw deltas of the
    events a read completes (up to ``[DONE]``: as the SDK's reader, nothing after it counts),
    ``end`` those the body's last byte completes, ``close`` says how the body ended. An error
    event (or a malformed one) comes after the deltas before it: ``feed`` keeps it and sets
    ``over``, and ``close`` raises it."""

    def __init__(self) -> None:
        self._sse = SseData()
        self._error: ProviderError | None = None
        self.streamed_text: set[int] = set()
        self.streamed_reasoning: set[int] = set()
        self.events = 0
        self.finished = False  # response.completed / incomplete: the stream ended on purpose
        self.over = False  # [DONE] or an error: read no further

    def feed(self, data: bytes) -> list[RawDelta]:
        return self._deltas(self._sse.feed(data))

    def end(self) -> list[RawDelta]:
        """At the body's end: the deltas of an event its last byte ends (none once ``over``)."""
        return [] if self.over else self._deltas(self._sse.end())

    def _deltas(self, payloads: list[str]) -> list[RawDelta]:
        out: list[RawDelta] = []
        try:
            for payload in payloads:
                if payload.startswith("[DONE]"):
                    self.over = True
                    break
                self.event(_event_object(payload), out)
        except ProviderError as exc:
            self._error = exc
            self.over = True
        return out

    def close(self, content_type: str | None) -> None:
        """After ``end``: the held error, or why the body's end is not the answer's
        (``content_type``: the response's, for a body without events)."""
        if self._error is not None:
            raise self._error
        if self.finished:
            return
        if not self.events:
            # What is not SSE reads as no events (an HTML page, plain text).
            raise bad_response(f"no events (content type {content_type!r})")
        raise ProviderConnectionError(
            "connection to the provider lost mid-response (no response.completed)"
        )

    def event(self, data: dict[str, Any], out: list[RawDelta]) -> None:
        """The raw deltas of one event (its JSON), added to ``out``."""
        kind = data.get("type", "")
        self.events += 1
        index = int(data.get("output_index") or 0)
        if kind == "response.output_text.delta":
            self.streamed_text.add(index)
            out.append(RawText(data.get("delta", "")))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            self.streamed_reasoning.add(index)
            summary = kind == "response.reasoning_summary_text.delta"
            out.append(RawReasoning(data.get("delta", ""), summary=summary))
        elif kind == "response.function_call_arguments.delta":
            out.append(RawToolCall(index, arguments=data.get("delta", "")))
        elif kind == "response.output_item.added":
            item = data.get("item") or {}
            if item.get("type") == "function_call":
                out.append(RawToolCall(index, item.get("call_id", ""), item.get("name", "")))
        elif kind == "response.output_item.done":
            out += _item_deltas(
                data.get("item") or {},
                index,
                with_text=index not in self.streamed_text,
                with_reasoning=index not in self.streamed_reasoning,
            )
        elif kind in ("response.completed", "response.incomplete"):
            self.finished = True
            usage = (data.get("response") or {}).get("usage") or {}
            out.append(
                RawUsage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0))
            )
        elif kind in ("response.failed", "error"):
            raise ProviderError(f"provider error: {_failure_text(data)}")

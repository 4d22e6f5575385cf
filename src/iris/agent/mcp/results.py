"""What an MCP call's result and progress look like to the model and the surfaces (pure)."""

from __future__ import annotations

import json
from typing import Any

from mcp import types

from iris.agent.tools import ToolResult, cap


def progress_note(progress: float, total: float | None, message: str | None) -> str:
    """A progress notification as one line: the server's message, else ``progress/total``."""
    line = " ".join((message or "").split())
    if line:
        return line[:200]
    if total:
        return f"{progress:g}/{total:g}"
    return f"{progress:g}"


def parameters(schema: dict[str, Any]) -> dict[str, Any]:
    """The server's input schema as a function's parameters (always an object schema)."""
    if schema.get("type") == "object":
        return schema
    return {**schema, "type": "object", "properties": schema.get("properties", {})}


def result(call: types.CallToolResult, limit: int) -> ToolResult:
    """A call's result as the model sees it: text parts, a short note per image, audio or
    resource, the structured content as JSON when the text does not already hold it; capped at
    ``limit`` characters. ``isError`` makes it a tool error."""
    parts: list[str] = []
    for block in call.content:
        match block:
            case types.TextContent(text=text):
                parts.append(text)
            case types.ImageContent(mime_type=mime, data=data):
                parts.append(f"[image: {mime}, {_size(data)} bytes]")
            case types.AudioContent(mime_type=mime, data=data):
                parts.append(f"[audio: {mime}, {_size(data)} bytes]")
            case types.ResourceLink(uri=uri, name=name):
                parts.append(f"[resource link: {name} {uri}]")
            case types.EmbeddedResource(resource=types.TextResourceContents(uri=uri, text=text)):
                parts.append(f"[resource {uri}]\n{text}")
            case types.EmbeddedResource(resource=resource):
                parts.append(f"[resource {resource.uri}: {resource.mime_type or 'binary'}]")
            case _:
                parts.append(f"[{getattr(block, 'type', 'content')}]")
    structured = call.structured_content
    if structured is not None and not _said(structured, parts):
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = cap("\n".join(parts), limit)
    if call.is_error:
        return ToolResult(False, f"error: {text}" if text else "error: the tool failed")
    return ToolResult(True, text)


def _said(structured: dict[str, Any], parts: list[str]) -> bool:
    """Does the text already carry the structured content? (Servers are asked to send it as
    JSON text too; the SDK's servers wrap a plain return value as ``{"result": value}``.)"""
    if list(structured) == ["result"] and str(structured["result"]) in parts:
        return True
    for part in parts:
        try:
            if json.loads(part) == structured:
                return True
        except ValueError:
            continue
    return False


def _size(data: str) -> int:
    """Bytes of a base64 payload, without decoding it."""
    return len(data) * 3 // 4 - data[-2:].count("=")

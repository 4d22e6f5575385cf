"""Server-sent-event framing: wire objects in, the exact bytes a client parses out.

Chat Completions clients want only ``data:`` lines (openai-node yields named events into the
chunk iterator); Responses clients want ``event:`` equal to the payload's ``type``. Both end
with ``data: [DONE]``. Each function returns whole events so a transport can write them in one
network write (some parsers lose an event split across reads).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

DONE = b"data: [DONE]\n\n"


# Compact separators: the payload is parsed by machines, and bytes are latency. One encoder
# for all: json.dumps with options builds a new one per call, a fifth of a chunk's cost.
_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def data_frame(obj: Mapping[str, Any]) -> bytes:
    """One unnamed event: ``data: {json}``."""
    if type(obj) is Made:
        return obj.frame
    return f"data: {_json(obj)}\n\n".encode()


class Made(dict[str, Any]):
    """An object made with its ``data:`` event's bytes (``Shape.fill``)."""

    __slots__ = ("frame",)
    frame: bytes


class Shape:
    """One object's ``data:`` event with one string left open, encoded once: ``fill(text)``
    is the object with ``text`` in that place, with the bytes ``data_frame`` makes of it,
    encoding only ``text`` (a streamed text delta's chunk: the rest of it never changes)."""

    _OPEN = "\x00open\x00"

    def __init__(self, build: Callable[[str], dict[str, Any]]) -> None:
        self._build = build
        frame = f"data: {_json(build(self._OPEN))}\n\n".encode()
        self._head, found, self._tail = frame.partition(_json(self._OPEN).encode())
        assert found and _json(self._OPEN).encode() not in self._tail, "one open place"

    def fill(self, text: str) -> Made:
        made = Made(self._build(text))
        made.frame = self._head + _json(text).encode() + self._tail
        return made


def named_frame(obj: Mapping[str, Any]) -> bytes:
    """One event named after its ``type`` field."""
    return f"event: {obj['type']}\ndata: {_json(obj)}\n\n".encode()


def data_frames(objs: Iterable[Mapping[str, Any]]) -> bytes:
    return b"".join(data_frame(obj) for obj in objs)


def named_frames(objs: Iterable[Mapping[str, Any]]) -> bytes:
    return b"".join(named_frame(obj) for obj in objs)

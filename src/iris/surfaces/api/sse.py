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
# What ``_json`` makes of a ``str``, without its dispatch on the type.
_string: Callable[[str], str] = json.encoder.encode_basestring


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
    """One event with open places, encoded once (a streamed text delta's: all but its text,
    and its sequence number, never changes): the bytes the whole event would encode to with
    values in those places, encoding only the values. ``build(*places)`` makes the event's
    object; ``named``: an event named after its ``type`` (``named_frame``), else an unnamed one
    (``data_frame``).

    ``text(s)`` fills one place with a string; ``numbered(n, s)`` two, a number then a string;
    ``fill(s)`` is the object itself with its bytes (``Made``)."""

    def __init__(
        self, build: Callable[..., dict[str, Any]], places: int = 1, *, named: bool = False
    ) -> None:
        self._build = build
        marks = [f"\x00open{i}\x00" for i in range(places)]
        rest = (named_frame if named else data_frame)(build(*marks))
        pieces: list[bytes] = []
        for mark in marks:
            before, found, rest = rest.partition(_json(mark).encode())
            assert found and _json(mark).encode() not in rest, "each place once, in order"
            pieces.append(before)
        pieces.append(rest)
        self._pieces = pieces

    def text(self, text: str) -> bytes:
        head, tail = self._pieces
        return head + _string(text).encode() + tail

    def numbered(self, number: int, text: str) -> bytes:
        head, middle, tail = self._pieces
        return head + str(number).encode() + middle + _string(text).encode() + tail

    def fill(self, text: str) -> Made:
        made = Made(self._build(text))
        made.frame = self.text(text)
        return made


def named_frame(obj: Mapping[str, Any]) -> bytes:
    """One event named after its ``type`` field."""
    return f"event: {obj['type']}\ndata: {_json(obj)}\n\n".encode()


def data_frames(objs: Iterable[Mapping[str, Any]]) -> bytes:
    return b"".join(data_frame(obj) for obj in objs)


def named_frames(objs: Iterable[Mapping[str, Any]]) -> bytes:
    return b"".join(named_frame(obj) for obj in objs)

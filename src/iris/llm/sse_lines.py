"""The hot path of a streamed answer: the response body's SSE lines and events, read in bulk.

The SDK keeps the control path (auth, the request, status errors before the body); the body is
then read here, off its socket where it can be (``iris.llm.socket_body``) or from httpx's
``aiter_bytes()`` (content-encoding undone). Everything here is synchronous and fed one network
read at a time: ``Lines`` splits a read's complete lines (in bytes, decoded once per read),
``SseData`` assembles them into events' data, ``loads_object`` parses one event's JSON. Each
provider's parser (``ChatChunks``, ``ResponseEvents``) turns that data into raw deltas, and its
``stream()`` is the one async generator between the socket and the agent. The SDK's own
iteration runs each line through four async generators and a text decoder (and, typed, builds
a model per event): most of the CPU a proxied chunk cost.

Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (the SSE grammar); text is UTF-8, a bad byte read
as U+FFFD as the SDK reads it.
"""

from __future__ import annotations

import json
from json.scanner import make_scanner
from typing import Any, cast

from iris.errors import ProviderError


class Lines:
    """A body's lines without their ends, a read at a time: ``split`` gives every line a read
    completes, ``end`` the last one when the body ends without a line end."""

    def __init__(self) -> None:
        self._rest = b""  # an incomplete line (with a "\r" last: its "\n" may come next)

    def split(self, data: bytes) -> list[str]:
        if self._rest:
            data = self._rest + data
        if b"\r" in data:
            held = data[-1:] == b"\r"  # a "\r\n" may be split between two reads
            if held:
                data = data[:-1]
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            end = data.rfind(b"\n")
            self._rest = data[end + 1 :] + b"\r" if held else data[end + 1 :]
        else:
            end = data.rfind(b"\n")
            self._rest = data[end + 1 :]
        if end < 0:
            return []
        # Line ends are ASCII: decoding the complete lines at once reads each as its own.
        return data[:end].decode("utf-8", "replace").split("\n")

    def end(self) -> list[str]:
        """The last line, unended (or ended by a "\r" that was the body's last byte)."""
        rest, self._rest = self._rest, b""
        return [rest.removesuffix(b"\r").decode("utf-8", "replace")] if rest else []


_FIELDS = ("data", "event", "id", "retry", ":")


class SseData:
    """The data of each server-sent event a read completes (a blank line ends an event that
    has data; its data lines joined by "\\n"). Comments and other fields are skipped.

    ``strict``: a line that is no SSE field before the first event means the body is not SSE
    (an HTML page, plain text): ``not_sse`` holds it and ``feed`` stops there. ``first`` is the
    body's first non-empty line, for saying what a body without events looked like."""

    def __init__(self, *, strict: bool = False) -> None:
        self._lines = Lines()
        self._data: list[str] = []
        self._strict = strict
        self.events = 0
        self.first = ""
        self.not_sse: str | None = None

    def feed(self, data: bytes) -> list[str]:
        return self._events(self._lines.split(data))

    def end(self) -> list[str]:
        """The events the body's unended last line completes: none (it cannot end one), but
        it may be the body's first line or one that is not SSE."""
        return self._events(self._lines.end())

    def _events(self, lines: list[str]) -> list[str]:
        if not self.first:
            self.first = next(filter(None, lines), "")
        done: list[str] = []
        data = self._data
        for line in lines:
            if line[:5] == "data:":
                data.append(line[6:] if line[5:6] == " " else line[5:])
            elif line:
                if self._strict and not self.events and not line.startswith(_FIELDS):
                    self.not_sse = line
                    break
            elif data:
                done.append(data[0] if len(data) == 1 else "\n".join(data))
                self.events += 1
                data.clear()
        return done


# The C scanner ``json.loads`` runs (its context: a decoder with the default settings).
_scan: Any = make_scanner(cast(Any, json.JSONDecoder()))


def loads_object(payload: str) -> dict[str, Any]:
    """One event's JSON object; anything else is the provider's fault, said as such."""
    value: Any = None
    if payload[:1] == "{":  # the usual event: json.loads's scanner, without its wrapping
        try:
            value, end = _scan(payload, 0)
        except (ValueError, StopIteration):
            raise ProviderError("the provider sent a malformed stream chunk") from None
        if end != len(payload) and payload[end:].strip(" \t\n\r"):
            raise ProviderError("the provider sent a malformed stream chunk")
    else:
        try:
            value = json.loads(payload)
        except ValueError:
            raise ProviderError("the provider sent a malformed stream chunk") from None
    if not isinstance(value, dict):
        raise ProviderError("the provider sent a stream chunk that is not a JSON object")
    return value  # pyright: ignore[reportUnknownVariableType]

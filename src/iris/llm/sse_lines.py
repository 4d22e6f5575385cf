"""The hot path of a streamed answer: the response body's SSE lines and events, read in bulk.

The SDK keeps the control path (auth, the request, status errors before the body); the body is
then read here, off its socket where it can be (``iris.llm.socket_body``) or from httpx's
``aiter_bytes()`` (content-encoding undone): lines are split in
bytes, every complete line of one network read at once, and each event's JSON is parsed once.
The SDK's own iteration runs each line through four async generators and a text decoder (and,
typed, builds a model per event): most of the CPU a proxied chunk cost.

Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (the SSE grammar); text is UTF-8, a bad byte read
as U+FFFD as the SDK reads it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from iris.errors import ProviderError


async def line_batches(body: AsyncIterator[bytes]) -> AsyncGenerator[list[str]]:
    """The body's lines without their ends: all the complete lines of each read, as one list
    (none empty of lines); a last line without an end comes out at the end of the body."""
    rest = b""
    async for chunk in body:
        data = rest + chunk
        if b"\r" in data:
            held = data.endswith(b"\r")  # a "\r\n" may be split between two reads
            if held:
                data = data[:-1]
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            *lines, rest = data.split(b"\n")
            rest += b"\r" if held else b""
        else:
            *lines, rest = data.split(b"\n")
        if lines:
            yield [line.decode("utf-8", "replace") for line in lines]
    if rest:  # an unended last line, or one whose "\r" was the body's last byte
        yield [rest.removesuffix(b"\r").decode("utf-8", "replace")]


@dataclass
class Event:
    """One server-sent event: its ``event:`` name ("" when unnamed) and its data lines."""

    name: str = ""
    data: list[str] = field(default_factory=list[str])

    @property
    def payload(self) -> str:
        return "\n".join(self.data)


def parse_events(lines: list[str], pending: Event) -> tuple[list[Event], Event]:
    """The events ``lines`` complete (a blank line ends one that has data), and the one still
    being read (pass it back in with the next lines). Comments and ``id``/``retry`` are
    skipped."""
    done: list[Event] = []
    for line in lines:
        if not line:
            if pending.data:
                done.append(pending)
            pending = Event()
        elif line.startswith("data:"):
            pending.data.append(line[5:].removeprefix(" "))
        elif line.startswith("event:"):
            pending.name = line[6:].strip()
    return done, pending


def loads_object(payload: str) -> dict[str, Any]:
    """One event's JSON object; anything else is the provider's fault, said as such."""
    try:
        value: Any = json.loads(payload)
    except ValueError:
        raise ProviderError("the provider sent a malformed stream chunk") from None
    if not isinstance(value, dict):
        raise ProviderError("the provider sent a stream chunk that is not a JSON object")
    return value  # pyright: ignore[reportUnknownVariableType]

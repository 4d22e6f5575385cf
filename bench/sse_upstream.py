"""The benches' fake upstream: one streamed SSE answer per request, on an absolute schedule.

Raw asyncio in a process of its own (so its CPU is never the measured server's): a ``POST``
is answered ``200`` with a chunked ``text/event-stream`` body whose events come from the
bench's ``Events`` — made one at a time, as each falls due (``rate`` per second from the
request's arrival, so the rate does not drift with the time a write takes; an event may
carry the clock it was written at) — and a ``GET`` (``/v1/models``) with the model list.
A connection is kept for the next request, as providers' servers do, until the client closes
it or sends ``connection: close``. ``api_overhead.py`` streams chat chunks carrying their send time; ``chunk_cost.py`` the test
fakes' chat, Responses and tool-call events.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Iterable
from typing import Any

Events = Callable[[str, dict[str, Any]], Iterable[bytes]]  # (path, body) -> SSE events


async def _answer(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    events: Events,
    rate: float,
    model: str,
) -> None:
    """Answer requests on one connection until the client closes it (or asks to)."""
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return  # the client closed its kept-alive connection
            length, closing = 0, False
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"connection":
                    closing = b"close" in value.lower()
            body = json.loads(await reader.readexactly(length)) if length else {}
            await _one(head, body, writer, events, rate, model)
            if closing:
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def _one(
    head: bytes,
    body: dict[str, Any],
    writer: asyncio.StreamWriter,
    events: Events,
    rate: float,
    model: str,
) -> None:
    if head.startswith(b"GET"):
        listed = json.dumps({"object": "list", "data": [{"id": model, "object": "model"}]})
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(listed)}\r\n\r\n{listed}".encode()
        )
        await writer.drain()
        return
    path = head.split(b" ", 2)[1].decode()
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    start, interval = time.monotonic(), 1.0 / rate
    due = iter(events(path, body))
    for i in itertools.count():
        delay = start + i * interval - time.monotonic()  # the absolute schedule
        if delay > 0:
            await asyncio.sleep(delay)
        data = next(due, None)  # made now, when it is due (it may carry the time)
        if data is None:
            break
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def serve(port: int, events: Events, rate: float, model: str, backlog: int = 1024) -> None:
    """Answer every request on 127.0.0.1:``port`` until the process is stopped."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _answer(reader, writer, events, rate, model)

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=backlog)
    async with server:
        await server.serve_forever()

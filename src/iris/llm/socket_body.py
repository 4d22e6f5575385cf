"""A streamed answer's body read straight off its socket.

Read through httpx, each network read of a body goes down seven async layers (httpx,
httpcore's pool and connection, h11's chunk parser, anyio's stream with a cancel scope and a
timer armed per read, the transport's reading paused and resumed per read): a third of a
proxied chunk's CPU. ``iris.llm.plain_http`` reads the answer's head itself and makes the
connection's protocol a ``SocketBody``, which undoes the framing (chunked, a
``content-length``, or to the close) as bytes arrive and hands the body to one reader; when
the reader is done (``settle``) it reads the framing to its end, and the connection is kept
for the next request.

Only where the read is plain: HTTP/1.1 over TCP without TLS, no content-encoding. Anything
else (TLS, a proxy, gzip, a test's mock transport, an SDK not on httpx2) is read through httpx
as before. Silence is the caller's to time (the agent's per-delta deadline), as with httpx's
read timeout.

Either way the reader gets a ``Body``: one ``await body.read()`` per network read (several
reads' worth when it is behind), no async generator between the socket and the parser.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import httpx

from iris.errors import ProviderConnectionError

# Past this much unread body the socket is not read until the reader catches up.
_HIGH_WATER = 256 * 1024
# A chunk-size line (and a trailer line) longer than this is not HTTP.
_MAX_LINE = 8 * 1024
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
# A chunk-size line as servers write it (others, e.g. with spaces, take the long way).
_CHUNK_HEAD = re.compile(rb"([0-9A-Fa-f]{1,16})(?:;[^\r\n]*)?\r?\n")
# Where ``iris.llm.plain_http`` puts the ``SocketBody`` of a response it read the head of.
BODY_EXTENSION = "iris.socket_body"


class Body(Protocol):
    async def read(self) -> bytes:
        """The body's next bytes (all that arrived since the last read), b"" at its end."""
        ...

    def over(self) -> None:
        """The reader has the stream's last event: what is left is framing, worth waiting
        for to keep the connection (an interrupted stream's connection is closed instead,
        so the provider stops)."""
        ...


def body_of(response: httpx.Response | Any) -> Body:
    """The body of a streamed ``response`` (from ``AsyncAPIResponse.http_response``): off the
    socket where it can be (``SocketBody``), else ``response.aiter_bytes()``."""
    own = getattr(response, "extensions", {}).get(BODY_EXTENSION)
    return own if isinstance(own, SocketBody) else _HttpxBody(response.aiter_bytes())


class _HttpxBody:
    def __init__(self, reads: AsyncIterator[bytes]) -> None:
        self._reads = reads

    async def read(self) -> bytes:
        return await anext(self._reads, b"")  # httpx gives no empty read before the end

    def over(self) -> None:
        pass  # httpx closes or keeps the connection itself


class SocketBody(asyncio.Protocol):
    """A connection's protocol once its answer's head was read (``plain_http``): the body's
    bytes, framing undone, for ``read()``."""

    def __init__(self, transport: asyncio.Transport, length: int | None, chunked: bool) -> None:
        self._transport = transport
        self._chunked = chunked
        # Bytes of the body still to come: a content-length's rest, or the current chunk's
        # (-1: the CRLF after a chunk's data is next; 0: a chunk-size line is next).
        self._left = length if length is not None else 0
        self._to_close = length is None and not chunked  # the body ends when the peer closes
        self._trailers = False  # past the last chunk: trailer lines until an empty one
        self._line = b""  # an incomplete framing line
        self._parts: list[bytes] = []
        self._held = 0
        self._paused = False
        self._ended = length == 0  # the body's last byte came
        self._past = False  # bytes came after the body's end
        self._dropping = False  # the reader is gone (``settle``): the rest is not kept
        self._then: Callable[[], None] | None = None
        self.finished = False  # the reader had the stream's last event (``over``)
        self._lost: str | None = None  # why the body ended before its end
        self._waiter: asyncio.Future[None] | None = None

    # -- the reader's side ----------------------------------------------------------------
    async def read(self) -> bytes:
        """The body's bytes that arrived since the last read (b"" at the body's end);
        ``ProviderConnectionError`` when the connection ends before the body."""
        while True:
            if self._parts:
                parts, self._parts, self._held = self._parts, [], 0
                if self._paused:
                    self._paused = False
                    self._transport.resume_reading()
                return parts[0] if len(parts) == 1 else b"".join(parts)
            if self._ended:
                return b""
            if self._lost is not None:
                raise ProviderConnectionError(f"connection to the provider lost: {self._lost}")
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    # -- the transport's side -------------------------------------------------------------
    @property
    def reusable(self) -> bool:
        """The body was read to its end (marked by its framing, not by a close) and nothing
        came after it: the connection may carry another request."""
        return self._ended and not self._to_close and not self._past and self._lost is None

    def over(self) -> None:
        self.finished = True

    def settle(self, then: Callable[[], None]) -> None:
        """The reader is done with the body: drop what is left of it, and call ``then`` once
        its framing ends or the connection does (at once when that happened already)."""
        self._then = then
        self._parts, self._held, self._dropping = [], 0, True
        if self._paused:
            self._paused = False
            self._transport.resume_reading()
        if self._ended or self._lost is not None:
            self._settled()

    def _settled(self) -> None:
        then, self._then = self._then, None
        if then is not None:
            then()

    def data_received(self, data: bytes) -> None:
        if self._ended or self._lost is not None or not data:
            self._past = self._past or bool(data)
            return  # bytes past the body's end are not the body
        if self._chunked:
            self._unchunk(data)
        elif self._to_close:
            self._keep(data)
        else:
            part = data[: self._left]
            self._left -= len(part)
            self._keep(part)
            self._ended = self._left == 0
            self._past = len(data) > len(part)
        if self._held > _HIGH_WATER and not self._paused:
            self._paused = True
            self._transport.pause_reading()
        waiter = self._waiter  # (``_wake``, inlined: once per network read)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        elif self._then is not None and (self._ended or self._lost is not None):
            self._settled()

    def eof_received(self) -> bool:
        self._closed(None)
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed(exc)

    def _closed(self, exc: Exception | None) -> None:
        if self._to_close and exc is None:
            self._ended = True
        elif not self._ended and self._lost is None:
            self._lost = type(exc).__name__ if exc else "the body was cut short"
        self._wake()
        self._settled()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _keep(self, part: bytes) -> None:
        if part and not self._dropping:
            self._parts.append(part)
            self._held += len(part)

    def _unchunk(self, data: bytes) -> None:
        """Chunked framing undone (RFC 9112 §7.1): size lines, data, CRLFs, trailers."""
        buffer = self._line + data if self._line else data
        at, end = 0, len(buffer)
        while at < end:
            if not self._left and not self._trailers:  # a chunk-size line is next
                head = _CHUNK_HEAD.match(buffer, at)
                if head is not None:  # the usual one: a whole chunk is one match and a slice
                    size = int(head[1], 16)
                    at = head.end()
                    stop = at + size
                    if size and buffer[stop : stop + 2] == b"\r\n":
                        if not self._dropping:
                            self._parts.append(buffer[at:stop])
                            self._held += size
                        at = stop + 2
                    else:
                        self._left = size
                        self._trailers = not size
                    continue
            if self._left > 0:  # inside a chunk's data
                part = buffer[at : at + self._left]
                self._keep(part)
                at += len(part)
                self._left -= len(part)
                if not self._left:
                    self._left = -1
                continue
            newline = buffer.find(b"\n", at)
            if newline < 0:
                break
            line = buffer[at:newline].removesuffix(b"\r")
            at = newline + 1
            if self._left < 0:  # the CRLF that ends a chunk's data
                if line:
                    return self._broken("a chunk's data ran past its size")
                self._left = 0
            elif self._trailers:
                if not line:
                    self._ended = True
                    self._past = at < end
                    return
            else:
                size = line.split(b";", 1)[0].strip()
                if not _CHUNK_SIZE.fullmatch(size):
                    return self._broken("a malformed chunk size")
                self._left = int(size, 16)
                self._trailers = self._left == 0
        self._line = buffer[at:]
        if len(self._line) > _MAX_LINE:
            self._broken("a chunk-size line without an end")

    def _broken(self, why: str) -> None:
        self._lost = f"the body's framing is broken ({why})"
        self._transport.abort()

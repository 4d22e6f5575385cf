"""The SDK's requests to a provider over plain HTTP/1.1, on connections kept alive.

Under the SDK (which keeps auth, headers, status errors, retries and the parsing of whole
answers), httpx hands each request to httpcore: a pool, a connection, h11, anyio's stream
with a cancel scope and a timer per read — about a third of what a streamed request costs
Iris before its first chunk. And a connection whose body ``SocketBody`` read was never
reused: httpcore never saw that body end. ``PlainTransport`` is the SDK's transport instead,
for ``http://`` without a proxy: it writes the request head and body in one write, reads the
response head with httptools, and hands the body to a ``SocketBody`` (in the response's
``extensions``, for ``socket_body.body_of``; httpx reads it as a plain byte stream). A body
read to its end, with nothing after it, returns its connection to the pool.

Everything else (https, a body sent in chunks) goes to ``fallback``: httpx's own transport,
as before. Where the environment names a proxy, ``wire`` does not use this transport at all
(httpx honours proxies only on a client of its own transport).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import time
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import httptools
import httpx2

from iris.errors import ProviderConnectionError
from iris.llm.socket_body import BODY_EXTENSION, SocketBody

# A response head longer than this is not one.
_MAX_HEAD = 64 * 1024
# How long a body its reader left may take to reach its end before its connection is closed.
_SETTLE = 1.0
# What no header name or value may hold (it would end the header, or the head).
_UNSAFE = re.compile(rb"[\r\n\0]")
# No body, whatever the head says (RFC 9112 §6.3).
_NO_BODY = frozenset({204, 304})


class PlainTransport(httpx2.AsyncBaseTransport):
    """httpx2's transport for the SDK's client: plain HTTP/1.1 by itself, the rest through
    ``fallback``. At most ``keep`` idle connections per host, each for ``expiry`` seconds."""

    def __init__(
        self, fallback: httpx2.AsyncBaseTransport, *, keep: int = 100, expiry: float = 5.0
    ) -> None:
        self._fallback = fallback
        self._keep = keep
        self._expiry = expiry
        self._idle: dict[tuple[str, int], list[_Link]] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if url.scheme != "http" or "transfer-encoding" in request.headers or self._closed:
            return await self._fallback.handle_async_request(request)
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        body = await request.aread()
        head = _request_head(request)
        where = (url.host, url.port or 80)
        link = self._take_idle(where)
        if link is not None:
            try:
                return await self._exchange(request, link, head, body, timeouts, where)
            except _Stale:
                pass  # the server closed it while idle, before reading this request: once more
        link = await _connect(where, timeouts.get("connect"))
        try:
            return await self._exchange(request, link, head, body, timeouts, where)
        except _Stale as exc:
            raise httpx2.RemoteProtocolError(
                "the provider closed the connection without an answer", request=request
            ) from exc

    async def _exchange(
        self,
        request: httpx2.Request,
        link: _Link,
        head: bytes,
        body: bytes,
        timeouts: dict[str, float | None],
        where: tuple[str, int],
    ) -> httpx2.Response:
        try:
            if len(body) < 65536:
                link.transport.write(head + body)  # one write, one segment
            else:  # no copy of a long conversation
                link.transport.write(head)
                link.transport.write(body)
            answer = await link.read_head(timeouts.get("read"), request)
            length, chunked = _framing(request.method, answer.status, answer.fields, request)
        except BaseException:
            link.transport.abort()
            raise
        reader = SocketBody(link.transport, length, chunked)
        link.transport.set_protocol(reader)
        reader.data_received(answer.rest)
        if link.head.lost is not None:
            reader.connection_lost(None)
        elif link.head.eof:
            reader.eof_received()
        kept = answer.version == "1.1" and _keeps_alive(answer.fields)
        stream = _Body(self, link, reader, where, timeouts.get("read"), kept)
        extensions: dict[str, Any] = {
            "http_version": f"HTTP/{answer.version}".encode(),
            "reason_phrase": answer.reason,
        }
        if _identity(answer.fields):
            extensions[BODY_EXTENSION] = reader
        return httpx2.Response(
            answer.status, headers=answer.fields, stream=stream, extensions=extensions
        )

    def _take_idle(self, where: tuple[str, int]) -> _Link | None:
        links = self._idle.get(where)
        now = time.monotonic()
        while links:
            link = links.pop()
            if link.idle.usable(now, self._expiry):
                link.transport.set_protocol(link.head)
                return link
            link.transport.abort()
        return None

    def keep(self, link: _Link, where: tuple[str, int]) -> None:
        """``link``'s answer was read to its end: kept for the next request (or closed)."""
        links = self._idle.setdefault(where, [])
        if (
            self._closed
            or len(links) >= self._keep
            or link.transport.is_closing()
            or link.transport.get_write_buffer_size()  # an early answer: the body still going
        ):
            link.transport.close()
            return
        link.idle = _Idle(time.monotonic())
        link.transport.set_protocol(link.idle)
        links.append(link)

    async def aclose(self) -> None:
        self._closed = True
        for links in self._idle.values():
            for link in links:
                link.transport.close()
        self._idle.clear()
        await self._fallback.aclose()


class _Stale(Exception):
    """A kept-alive connection closed before any of its answer came."""


class _Head(asyncio.Protocol):
    """A connection's protocol while a request goes out and its answer's head comes in."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.eof = False
        self.lost: Exception | None = None
        self.waiter: asyncio.Future[None] | None = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return True  # a half-closed peer may still have sent the whole answer

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionResetError("the connection closed")
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


class _Idle(asyncio.Protocol):
    """A kept-alive connection's protocol between requests: anything it hears ends it."""

    def __init__(self, since: float) -> None:
        self.since = since
        self.over = False

    def data_received(self, data: bytes) -> None:
        self.over = True  # an answer nobody asked for: the connection is out of step

    def eof_received(self) -> bool:
        self.over = True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.over = True

    def usable(self, now: float, expiry: float) -> bool:
        return not self.over and now - self.since < expiry


class _Link:
    """One connection to the provider: its transport, and its head reader for the next
    request (a fresh one per request)."""

    def __init__(self, transport: asyncio.Transport, head: _Head) -> None:
        self.transport = transport
        self.head = head
        self.idle = _Idle(0.0)
        self.reused = False

    async def read_head(self, within: float | None, request: httpx2.Request) -> _AnswerHead:
        """The answer's head, and what came after it; 1xx interim answers skipped."""
        head = self.head
        interim = False  # a 1xx came: the provider read this request
        try:
            async with asyncio.timeout(within):
                while True:
                    end = head.buffer.find(b"\r\n\r\n")
                    if end >= 0:
                        answer = _parse_head(bytes(head.buffer[: end + 4]), request)
                        del head.buffer[: end + 4]
                        if 100 <= answer.status < 200:
                            interim = True
                            continue
                        return answer._replace(rest=bytes(head.buffer))
                    if len(head.buffer) > _MAX_HEAD:
                        raise httpx2.RemoteProtocolError(
                            "a response head too long", request=request
                        )
                    if head.eof or head.lost is not None:
                        if self.reused and not head.buffer and not interim:
                            raise _Stale
                        raise httpx2.RemoteProtocolError(
                            "the provider closed the connection before its answer's head",
                            request=request,
                        )
                    head.waiter = asyncio.get_running_loop().create_future()
                    try:
                        await head.waiter
                    finally:
                        head.waiter = None
        except TimeoutError as exc:
            raise httpx2.ReadTimeout(
                "no answer from the provider in time", request=request
            ) from exc


class _Body(httpx2.AsyncByteStream):
    """The answer's body as httpx reads it (whole answers, errors); Iris's streams read the
    ``SocketBody`` itself. Closing it returns the connection to the pool when the body ended
    cleanly, and closes it otherwise."""

    def __init__(
        self,
        pool: PlainTransport,
        link: _Link,
        reader: SocketBody,
        where: tuple[str, int],
        timeout: float | None,
        keep_alive: bool,
    ) -> None:
        self._pool = pool
        self._link = link
        self._reader = reader
        self._where = where
        self._timeout = timeout
        self._keep_alive = keep_alive
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            try:
                async with asyncio.timeout(self._timeout):
                    data = await self._reader.read()
            except TimeoutError as exc:
                raise httpx2.ReadTimeout("the provider went silent") from exc
            except ProviderConnectionError as exc:
                raise httpx2.ReadError(str(exc)) from exc
            if not data:
                return
            yield data

    async def aclose(self) -> None:
        if self._done:
            return
        self._done = True
        link, reader = self._link, self._reader
        if not self._keep_alive or not (reader.reusable or reader.finished):
            link.transport.abort()  # a body left early: the provider stops sending it
            return
        # A stream's reader stops at its last event (``[DONE]``), often before the framing's
        # end is read: the connection waits for it, a moment at most, then goes back.
        timer = asyncio.get_running_loop().call_later(_SETTLE, link.transport.abort)

        def settled() -> None:
            timer.cancel()
            if reader.reusable:
                link.head = _Head()
                link.reused = True
                self._pool.keep(link, self._where)
            else:
                link.transport.abort()

        reader.settle(settled)


async def _connect(where: tuple[str, int], within: float | None) -> _Link:
    loop = asyncio.get_running_loop()
    head = _Head()
    try:
        async with asyncio.timeout(within):
            transport, _ = await loop.create_connection(lambda: head, *where)
    except TimeoutError as exc:
        raise httpx2.ConnectTimeout(f"connecting to {where[0]}:{where[1]} took too long") from exc
    except OSError as exc:
        raise httpx2.ConnectError(f"cannot connect to {where[0]}:{where[1]}: {exc}") from exc
    with contextlib.suppress(OSError, AttributeError):
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return _Link(transport, head)


def _request_head(request: httpx2.Request) -> bytes:
    target = request.url.raw_path
    lines = [request.method.encode("ascii"), b" ", target, b" HTTP/1.1\r\n"]
    for name, value in request.headers.raw:
        if _UNSAFE.search(name) or _UNSAFE.search(value):  # no header may start another
            raise httpx2.LocalProtocolError(f"a header unfit to send: {name!r}", request=request)
        lines += (name, b": ", value, b"\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


class _HeadFields:
    """httptools' callbacks for one response head."""

    def __init__(self) -> None:
        self.fields: list[tuple[bytes, bytes]] = []
        self.reason = b""

    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self.fields.append((name, value))


class _AnswerHead(NamedTuple):
    status: int
    version: str  # "1.1" or "1.0"
    reason: bytes
    fields: list[tuple[bytes, bytes]]
    rest: bytes = b""  # what came after the head


def _parse_head(data: bytes, request: httpx2.Request) -> _AnswerHead:
    found = _HeadFields()
    parser = httptools.HttpResponseParser(found)
    try:
        parser.feed_data(data)
    except httptools.HttpParserError as exc:
        raise httpx2.RemoteProtocolError(
            f"a malformed response head: {exc}", request=request
        ) from exc
    version = parser.get_http_version()
    if version not in ("1.1", "1.0"):
        raise httpx2.RemoteProtocolError(f"an HTTP/{version} answer", request=request)
    return _AnswerHead(parser.get_status_code(), version, found.reason, found.fields)


def _field(fields: list[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    return [value for key, value in fields if key.lower() == name]


def _framing(
    method: str, status: int, fields: list[tuple[bytes, bytes]], request: httpx2.Request
) -> tuple[int | None, bool]:
    """(content length or None, chunked) of the answer's body (RFC 9112 §6.3)."""
    if method == "HEAD" or status in _NO_BODY:
        return 0, False
    codings = b",".join(_field(fields, b"transfer-encoding")).lower()
    if codings:
        return None, codings.rsplit(b",", 1)[-1].strip() == b"chunked"
    lengths = {value.strip() for value in _field(fields, b"content-length")}
    if not lengths:
        return None, False  # to the close
    if len(lengths) > 1 or not all(value.isdigit() for value in lengths):
        raise httpx2.RemoteProtocolError("a malformed content-length", request=request)
    return int(lengths.pop()), False


def _keeps_alive(fields: list[tuple[bytes, bytes]]) -> bool:
    return not any(b"close" in value.lower() for value in _field(fields, b"connection"))


def _identity(fields: list[tuple[bytes, bytes]]) -> bool:
    return all(
        value.strip().lower() in (b"", b"identity") for value in _field(fields, b"content-encoding")
    )

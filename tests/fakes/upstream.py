"""The fake OpenAI-compatible upstream: a real uvicorn server replaying scripted scenarios.

    with FakeUpstream() as up:            # or the function-scoped ``upstream`` fixture
        up.script(text("Hel", "lo"), error(429, retry_after=1))
        client = OpenAI(base_url=up.base_url, api_key="sk-test", max_retries=0)

It runs in its own thread with its own event loop, so sync tests (subprocess CLIs) and async
tests (any loop) can both talk to it over a real socket on 127.0.0.1. Each
``POST /v1/chat/completions`` or ``POST /v1/responses`` pops the next scenario; with nothing
queued it answers 500 "unexpected request" and records the request in ``up.unexpected`` (any
other path but ``GET /v1/models`` gets a recorded 404). Scenario builders live in
``scenarios.py`` and are re-exported here.

What a test can observe (all thread-safe, readable from any thread or loop):

- ``requests`` / ``unexpected``: ``Received(method, path, body, headers, at)`` in order
  (``.api``, ``.stream``); ``wait_for_request(n)`` blocks until the n-th arrived;
- ``sends``: every body write as ``Sent(at, data, kind)``, one whole SSE event each;
  ``delta_times`` the send times of the model-output events;
- ``finished`` / ``finished_at``: some response body was completely written;
- ``gate_reached``: a gated or held stream is waiting; ``release()`` lets it (and any later
  gate) go on; ``reset_gate()`` closes the gate again;
- ``disconnected`` / ``disconnected_at``: a client went away before its response was complete.

A model's window: with ``context_limit`` set (characters of the request's messages, input and
instructions), a longer request is answered as OpenAI does — ``400`` with
``{"error": {"code": "context_length_exceeded", ...}}`` — without taking a scenario (a real
model refuses whatever the script); those requests are kept in ``refused``. ``default``: the
scenario for a request when none is queued (``responder`` builds one per request).

``POST /v1/audio/transcriptions`` answers the next of ``transcripts`` (queued by the test) and
records each request in ``transcriptions``; with none queued, 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes import loopback
from tests.fakes.scenarios import (
    Event,
    Received,
    Reply,
    Scenario,
    ToolCall,
    drop,
    empty_200,
    ends_early,
    error,
    error_reply,
    garbage,
    gated,
    hang_after_first,
    hold,
    html_200,
    lone_surrogate,
    not_sse_200,
    openai_rules,
    reasoning,
    reject_stream,
    request_chars,
    responder,
    responses_text,
    responses_tool_call,
    stream_error,
    text,
    tool_call,
    tool_calls,
)

__all__ = [
    "Event",
    "FakeUpstream",
    "Received",
    "Reply",
    "Scenario",
    "Sent",
    "ToolCall",
    "drop",
    "empty_200",
    "ends_early",
    "error",
    "garbage",
    "gated",
    "hang_after_first",
    "hold",
    "html_200",
    "lone_surrogate",
    "not_sse_200",
    "openai_rules",
    "reasoning",
    "reject_stream",
    "responder",
    "responses_text",
    "responses_tool_call",
    "stream_error",
    "text",
    "tool_call",
    "tool_calls",
]


class _Drop(Exception):
    """Raised after the response started: uvicorn then closes the socket mid-body."""


class _QuietDrops(logging.Filter):
    # A deliberate drop is not an application error; keep the test log clean.
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], _Drop))


logging.getLogger("uvicorn.error").addFilter(_QuietDrops())


@dataclass(frozen=True)
class Transcription:
    """One ``/v1/audio/transcriptions`` request: the form's model and file, the bearer."""

    model: str
    filename: str
    content_type: str
    data: bytes
    authorization: str


@dataclass(frozen=True)
class Sent:
    """One network write of a response body."""

    at: float  # time.monotonic()
    data: bytes
    kind: str  # "head" | "delta" | "tail" for SSE events, "body" for a whole body


class FakeUpstream:
    def __init__(self, *, model: str = "fake-model") -> None:
        self.model = model
        self.listing: dict[str, Any] = {}  # extra fields of the model's GET /v1/models entry
        self.listings = 0  # GET /v1/models answered
        self.context_limit: int | None = None
        self.refused: list[Received] = []
        self.default: Scenario | None = None
        self.requests: list[Received] = []
        # /v1/audio/transcriptions: the texts to answer with, in order; what was sent.
        self.transcripts: deque[str] = deque()
        self.transcriptions: list[Transcription] = []
        self.unexpected: list[Received] = []
        self.sends: list[Sent] = []
        self.finished = threading.Event()  # a response body was fully written
        self.finished_at: float | None = None
        self.gate_reached = threading.Event()  # a gated/held stream is waiting for release()
        self.disconnected = threading.Event()  # a client went away mid-response
        self.disconnected_at: float | None = None
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._queue: deque[Scenario] = deque()
        self._released = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None  # set on release() and on stop
        self._stopping = False
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._port = 0
        self._startup_error: BaseException | None = None

    # ------------------------------------------------------------ test-facing API

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def port(self) -> int:
        assert self._port, "FakeUpstream is not started"
        return self._port

    def script(self, *scenarios: Scenario) -> FakeUpstream:
        """Queue scenarios; each chat/responses request pops the next one."""
        with self._lock:
            self._queue.extend(scenarios)
        return self

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def assert_used_up(self) -> None:
        with self._lock:
            left, surprises = list(self._queue), list(self.unexpected)
        assert not left, f"scripted scenarios never requested: {left}"
        assert not surprises, f"unexpected requests: {[r.path for r in surprises]}"

    def release(self) -> None:
        """Let gated/held streams continue (sticky: later gates pass at once)."""
        self._released.set()
        self._notify()

    def wait_for_request(self, count: int = 1, timeout: float = 5.0) -> Received:
        """Block until ``count`` requests have arrived; return the ``count``-th."""
        with self._arrived:
            arrived = self._arrived.wait_for(lambda: len(self.requests) >= count, timeout)
            assert arrived, f"{len(self.requests)} request(s) arrived, waited for {count}"
            return self.requests[count - 1]

    def reset_gate(self) -> None:
        """Close the gate again, for a second gated scenario in the same test."""
        self._released.clear()
        self.gate_reached.clear()

    @property
    def delta_times(self) -> list[float]:
        with self._lock:
            return [sent.at for sent in self.sends if sent.kind == "delta"]

    # ------------------------------------------------------------ lifetime

    def start(self) -> FakeUpstream:
        # Bind before the thread starts: clients may connect at once (the backlog holds them).
        sock = loopback.bind()
        self._socket, self._port = sock, sock.getsockname()[1]
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(sock, ready), name="fake-upstream", daemon=True
        )
        self._thread.start()
        ready.wait(5)
        if self._startup_error is not None:
            raise RuntimeError("fake upstream failed to start") from self._startup_error
        return self

    def close(self) -> None:
        if self._thread is None:
            return
        self._stopping = True
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                self._loop.call_soon_threadsafe(self._stop.set)
        self._notify()
        self._thread.join(5)
        assert not self._thread.is_alive(), "fake upstream thread did not stop"
        self._thread = None
        if self._socket is not None:
            self._socket.close()

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _notify(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    def _run(self, sock: socket.socket, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._serve(sock, ready))
        except BaseException as exc:
            self._startup_error = exc
            ready.set()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self, sock: socket.socket, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake, self._stop = asyncio.Event(), asyncio.Event()
        server = await loopback.start(self._app(), sock, lifespan="off")
        ready.set()
        await self._stop.wait()
        await loopback.stop(server)

    # ------------------------------------------------------------ HTTP

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", _Endpoint(self), methods=["POST"]),
                Route("/v1/responses", _Endpoint(self), methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/audio/transcriptions", self._transcribe, methods=["POST"]),
                Route("/{path:path}", self._unknown, methods=["GET", "POST", "PUT", "DELETE"]),
            ]
        )

    async def _models(self, request: Request) -> JSONResponse:
        model = {"id": self.model, "object": "model", "created": 0, "owned_by": "iris-fake"}
        with self._lock:
            self.listings += 1
        return JSONResponse({"object": "list", "data": [{**model, **self.listing}]})

    async def _transcribe(self, request: Request) -> Response:
        """``POST /v1/audio/transcriptions`` (multipart ``file`` + ``model``) as OpenAI's: the
        next of ``transcripts`` as ``{"text": ...}``; with none queued, 500."""
        form = await request.form()
        upload: Any = form.get("file")
        data = await upload.read() if upload is not None and hasattr(upload, "read") else b""
        heard = Transcription(
            str(form.get("model", "")),
            str(getattr(upload, "filename", "") or ""),
            str(getattr(upload, "content_type", "") or ""),
            data,
            request.headers.get("authorization", ""),
        )
        with self._lock:
            self.transcriptions.append(heard)
            answer = self.transcripts.popleft() if self.transcripts else None
        if answer is None:
            reply = error_reply(500, "unexpected transcription (none scripted)")
            return Response(reply.body, reply.status, media_type="application/json")
        return JSONResponse({"text": answer})

    async def _unknown(self, request: Request) -> Response:
        received = Received(
            request.method, request.url.path, {}, dict(request.headers), time.monotonic()
        )
        with self._arrived:
            self.requests.append(received)
            self.unexpected.append(received)
            self._arrived.notify_all()
        reply = error_reply(404, f"unexpected request: {request.method} {request.url.path}")
        return Response(reply.body, reply.status, media_type="application/json")

    async def handle(self, scope: Any, receive: Any, send: Any) -> None:
        raw = b""
        while True:  # the whole request body
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        received = Received(
            scope["method"],
            scope["path"],
            body if isinstance(body, dict) else {},
            headers,
            time.monotonic(),
        )
        limit = self.context_limit
        too_long = isinstance(body, dict) and limit is not None and request_chars(body) > limit
        with self._arrived:
            self.requests.append(received)
            scenario = None
            if too_long:
                self.refused.append(received)
            else:
                scenario = self._queue.popleft() if self._queue else self.default
                if scenario is None:
                    self.unexpected.append(received)
            self._arrived.notify_all()
        if not isinstance(body, dict):
            reply = error_reply(400, "request body is not a JSON object")
        elif too_long:
            message = (
                f"This model's maximum context length is {limit} characters. However, your "
                f"messages resulted in {request_chars(body)} characters. Please reduce the "
                "length of the messages."
            )
            reply = error_reply(400, message, code="context_length_exceeded", param="messages")
        elif scenario is None:
            message = f"unexpected request: {received.path} (no scenario scripted)"
            reply = error_reply(500, message, code="unexpected_request")
        else:
            reply = scenario.reply(received)
        await self._write(reply, receive, send)

    async def _write(self, reply: Reply, receive: Any, send: Any) -> None:
        gone = asyncio.Event()
        watcher = asyncio.create_task(self._watch(receive, gone))
        try:
            if reply.events is None:
                await self._write_whole(reply, send, gone)
            else:
                await self._write_stream(reply, send, gone)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _watch(self, receive: Any, gone: asyncio.Event) -> None:
        # uvicorn answers receive() with http.disconnect as soon as the peer closes.
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()
        with self._lock:
            if self.disconnected_at is None:
                self.disconnected_at = time.monotonic()
        self.disconnected.set()

    async def _write_whole(self, reply: Reply, send: Any, gone: asyncio.Event) -> None:
        if reply.gate_after is not None and not await self._gate(gone):
            return
        headers = [*reply.headers, ("content-length", str(len(reply.body)))]
        await send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": [(k.encode(), v.encode()) for k, v in headers],
            }
        )
        if reply.end == "drop":
            await self._send(send, reply.body[: len(reply.body) // 2], "body", more=True)
            raise _Drop
        await self._send(send, reply.body, "body", more=False)

    async def _write_stream(self, reply: Reply, send: Any, gone: asyncio.Event) -> None:
        assert reply.events is not None
        headers = [*reply.headers, ("cache-control", "no-cache")]
        await send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": [(k.encode(), v.encode()) for k, v in headers],
            }
        )
        gate_at, cut_at = reply.gate_index(), reply.cut_index()
        deltas = 0
        for index, event in enumerate(reply.events):
            if index == gate_at and not await self._gate(gone):
                return
            if reply.end == "drop" and index == cut_at:
                raise _Drop
            if event.kind == "delta":
                if deltas and reply.delay and await self._wait(gone, reply.delay):
                    return
                deltas += 1
            if gone.is_set():
                return
            await self._send(send, event.data, event.kind, more=True)
        if reply.end == "drop":  # a drop with nothing after the deltas
            raise _Drop
        await self._send(send, b"", "tail", more=False)

    async def _send(self, send: Any, data: bytes, kind: str, *, more: bool) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": more})
        now = time.monotonic()
        with self._lock:
            if data:
                self.sends.append(Sent(now, data, kind))
            if not more:
                self.finished_at = now
        if not more:
            self.finished.set()

    async def _gate(self, gone: asyncio.Event) -> bool:
        """Wait for release(); False if the client left. A stopping server drops the stream."""
        self.gate_reached.set()
        while not self._released.is_set():
            if self._stopping:
                raise _Drop
            if await self._wait(gone, None):
                return False
        return True

    async def _wait(self, gone: asyncio.Event, seconds: float | None) -> bool:
        """Sleep ``seconds``, or with None until release(); True if the client left.

        Stopping the server drops the stream so shutdown never waits on a held response."""
        assert self._wake is not None and self._stop is not None
        self._wake.clear()
        events = [gone, self._stop] if seconds is not None else [gone, self._stop, self._wake]
        released = seconds is None and self._released.is_set()
        if not released and not any(event.is_set() for event in events):
            waiters = [asyncio.create_task(event.wait()) for event in events]
            try:
                await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
        if self._stopping:
            raise _Drop
        return gone.is_set()


class _Endpoint:
    """A raw ASGI endpoint: the stream needs receive() to notice disconnects itself."""

    def __init__(self, upstream: FakeUpstream) -> None:
        self._upstream = upstream

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._upstream.handle(scope, receive, send)

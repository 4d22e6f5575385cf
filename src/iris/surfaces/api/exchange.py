"""One HTTP exchange that runs one agent turn: real SSE or one JSON answer.

The thin async transport around the pure encoders:

- each event's frames are written as soon as the agent yields it, in one network write;
- the opening frames wait for the first output, so a turn that fails before it still gets a
  real status; a silent stream gets ``: keep-alive`` comments (``heartbeat``);
- the turn races the client leaving: Starlette's own disconnect detection only fires on a
  failed write, and a turn that is thinking or running a tool writes nothing. Leaving the
  turn's ``async with`` cancels it and closes the upstream request.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from iris.agent.core import Agent, TurnRequest
from iris.errors import StoreUnavailable, user_message
from iris.events import Event, TurnEnded, TurnFailed, TurnStarted
from iris.observability import TurnWatch, client_gone, metrics
from iris.surfaces.api.problems import error_body
from iris.surfaces.api.sse import DONE
from iris.tasks import task_group

log = logging.getLogger("iris.api")

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # tell nginx-style proxies not to buffer the stream
]


class Wire(Protocol):
    """How one API spells a turn: the encoder behind an exchange."""

    def frames(self, event: Event) -> bytes:
        """The SSE bytes of ``event`` (empty when it shows nothing); also records it."""
        ...

    def answer(self) -> tuple[int, dict[str, Any]]:
        """Status and JSON body after the terminal event: a non-streamed turn, or a streamed
        one that failed before any output."""
        ...

    async def finished(self) -> None:
        """The turn ended (store what needs storing; may raise ``StoreUnavailable``)."""
        ...


class Running(Protocol):
    """What an exchange reads: a turn (``Turn``), or one leg of a held one (``held.Leg``)."""

    @property
    def watch(self) -> TurnWatch: ...

    def interrupt(self) -> None: ...

    def __aiter__(self) -> AsyncIterator[Event]: ...

    async def deliver(self, sink: Callable[[Event], Awaitable[None]]) -> None:
        """``await sink(event)`` for every event, in order, up to the terminal one (what the
        exchange reads with: a ``Turn`` does it a task wake-up cheaper than ``async for``)."""
        ...


class TurnExchange(Response):
    """An ASGI response: runs ``request`` on ``agent`` and answers through ``wire``.

    A ``Response`` only so Starlette routes accept it; it owns its own sending."""

    def __init__(
        self,
        agent: Agent,
        request: TurnRequest,
        wire: Wire,
        *,
        stream: bool,
        live: set[TurnExchange],
        release: Callable[[], None],
        source: AbstractAsyncContextManager[Running] | None = None,
    ) -> None:
        super().__init__()
        self._agent = agent
        self._request = request
        self._source = source  # None: the exchange runs ``request`` itself
        self._wire = wire
        self._stream = stream
        self._live = live  # the surface's open exchanges, wound down on shutdown
        self._closed = asyncio.Event()
        self._release: Callable[[], None] | None = release  # frees the turn's slot, once
        self._head_sent = False
        self._held = b""  # opening frames not yet written
        self._sending = asyncio.Lock()  # the turn and the heartbeat share one stream
        self._last_write = 0.0
        self._ended = False  # the terminal event was seen: the heartbeat stays quiet
        self._turn: Running | None = None
        self._retry_after: float | None = None  # the provider's, from a failed turn
        self._finished = False  # the slot is free and the turn stored (``_end``)
        self._unsaved: StoreUnavailable | None = None  # the store refused the finished turn

    # Seconds of silence (an agent tool running) before a stream gets an SSE comment, so
    # proxies with an idle timeout (nginx: 60 s) keep it open. Clients ignore comments.
    heartbeat = 15.0

    def interrupt(self) -> None:
        """End the turn now (server shutdown): it finishes as interrupted, text so far."""
        if self._turn is not None:
            self._turn.interrupt()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._live.add(self)
        beat = [self._beat(send)] if self._stream else []
        metrics.api_stream(self._stream)
        try:
            left = await while_connected(receive, self._run(send), self._wind_down, beside=beat)
            if left and self._turn is not None and self._turn.watch.outcome == "interrupted":
                client_gone(self._turn.watch, "api")  # the client's leaving cancelled it
        finally:
            metrics.api_stream(-self._stream)
            self._free()
            self._live.discard(self)
            self._closed.set()

    async def _wind_down(self, work: asyncio.Task[None]) -> bool:
        """Interrupt the turn and let it finish its reply; True when it did in time."""
        self.interrupt()
        done, _ = await asyncio.wait({work}, timeout=2.0)
        return work in done and not work.cancelled() and work.exception() is None

    async def _run(self, send: Send) -> None:
        try:
            source = self._source or self._agent.run(self._request)
            async with source as turn:
                self._turn = turn
                await turn.deliver(functools.partial(self._emit, send))
        except Exception as exc:
            if self._ended:
                raise
            # The agent reports failures as TurnFailed; anything else still ends the turn
            # in the client's format, never as a 500 or a silent hang.
            log.exception("turn failed outside the agent's event stream")
            code, message, retryable = user_message(exc)
            await self._emit(send, TurnFailed(code, message, retryable))
        await self._end()  # done already when the terminal event went out
        unsaved = self._unsaved
        if self._stream and self._head_sent:
            # The answer went out already; only a later GET of it will miss it.
            await self._write(send, DONE, more=False)  # both APIs end a stream so
            return
        # Not streamed, or failed before any output: a real status and one JSON body.
        status, body = self._wire.answer()
        if unsaved is not None:
            status = 503
            body = error_body(unsaved.message, type="server_error", code=unsaved.code)
        payload = json.dumps(body, ensure_ascii=False).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
        ]
        if status == 429 and self._retry_after is not None:
            # Passed on so the client's own retry waits as long as the provider asked; the
            # SDKs read the millisecond header first, HTTP wants whole seconds.
            seconds = self._retry_after
            headers.append((b"retry-after", str(math.ceil(seconds)).encode()))
            headers.append((b"retry-after-ms", str(round(seconds * 1000)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload, "more_body": False})

    async def _end(self) -> None:
        """Once per turn, before the client reads its end: free the turn's slot (a client that
        sends its next request at once must not be told the server is busy) and store what
        the turn stored (a client that retrieves or continues it at once must find it)."""
        if self._finished:
            return
        self._finished = True
        self._free()
        try:
            await self._wire.finished()
        except StoreUnavailable as exc:
            log.error("a finished turn was not stored: %s", exc.message)
            self._unsaved = exc

    def _free(self) -> None:
        if self._release is not None:
            release, self._release = self._release, None
            release()

    async def _emit(self, send: Send, event: Event) -> None:
        data = self._wire.frames(event)
        terminal = isinstance(event, TurnEnded | TurnFailed)
        if isinstance(event, TurnFailed):
            self._retry_after = event.retry_after
        self._ended = self._ended or terminal
        if terminal:
            await self._end()
        if not self._stream:
            return
        if not self._head_sent:
            # The opening frames (role chunk, response.created) wait for the model's first
            # output; they carry no text, and a turn that fails before any output can still
            # answer with a real status (429, 502) instead of a 200 and an in-band error.
            if isinstance(event, TurnStarted):
                self._held += data
                return
            if isinstance(event, TurnFailed):
                return
        if data or terminal:
            await self._write(send, data)

    async def _write(self, send: Send, data: bytes, *, more: bool = True) -> None:
        async with self._sending:
            if not self._head_sent:
                self._head_sent = True
                start = {"type": "http.response.start", "status": 200, "headers": SSE_HEADERS}
                await send(start)
                data, self._held = self._held + data, b""
            await send({"type": "http.response.body", "body": data, "more_body": more})
            self._last_write = asyncio.get_running_loop().time()

    async def _beat(self, send: Send) -> None:
        """Comment lines while the stream is silent; after ``heartbeat`` seconds without any
        output the head goes out too, so a long wait for the first token stays open."""
        loop = asyncio.get_running_loop()
        self._last_write = loop.time()
        while True:
            await asyncio.sleep(self.heartbeat)
            if not self._ended and loop.time() - self._last_write >= self.heartbeat:
                await self._write(send, b": keep-alive\n\n")


async def while_connected(
    receive: Receive,
    work: Coroutine[Any, Any, None],
    wind_down: Callable[[asyncio.Task[None]], Awaitable[bool]],
    *,
    beside: Sequence[Coroutine[Any, Any, None]] = (),
) -> bool:
    """Run ``work`` (and ``beside`` it, helpers such as a heartbeat) while the client stays;
    True when the client left first.

    One task group owns them and a watch for the client leaving: a client that leaves cancels
    the work (leaving a turn's ``async with`` closes the upstream request); work that ends
    stops the rest. A write that failed because the client left (``OSError``) is not an
    error. If the server's graceful shutdown runs out of patience and cancels this first,
    ``wind_down(task)`` may let the work finish its reply: True absorbs the cancellation."""
    try:
        async with task_group() as group:
            task = group.create_task(work)
            gone = group.create_task(_until_gone(receive))
            helpers = [group.create_task(helper) for helper in beside]
            try:
                await asyncio.wait([task])
            except asyncio.CancelledError:
                # Not the client leaving, not the work failing: the server is shutting down.
                if gone.done() or task.done() or not await wind_down(task):
                    raise
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
            for rest in (gone, *helpers):
                rest.cancel()
    except (_ClientGone, OSError):
        return True
    return False


class _ClientGone(Exception):
    """The client disconnected: the exchange's task group ends, cancelling the turn."""


async def _until_gone(receive: Receive) -> None:
    # The body was read already: the next message uvicorn delivers is http.disconnect.
    while (await receive())["type"] != "http.disconnect":
        pass
    raise _ClientGone

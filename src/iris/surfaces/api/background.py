"""Background responses: turns that run without a client, and the streams that follow them.

``background: true`` starts a ``BackgroundRun``: the turn runs on its own task, and every
Responses event the encoder makes is kept, in order (its ``sequence_number`` is its index).
A client polls the run's snapshot (``GET /v1/responses/{id}``), or follows it with a
``RunStream`` from any point (``?stream=true&starting_after=N``): the kept events after ``N``,
then the live ones, with nothing between them lost or repeated, since both come from the one
list. A follower leaving does not stop the run; ``cancel`` does (status ``cancelled``), and so
does the server's shutdown (status ``incomplete``, reason ``interrupted``).

``BackgroundRuns`` keeps runs by id: running ones always, ended ones for ``ttl`` seconds and at
most ``keep`` of them; the stored response outlives both (``iris.state.responses``).

With a shared store (``store.url``) every run is also copied to Redis (``iris.state.background``)
as it goes, so the other processes answer for it: ``RemoteRunStream`` follows it from there, a
cancel asked elsewhere reaches the run through ``BackgroundRuns``' watch. The run's process
holds a lease on it while it runs; every process's reaper ends the runs whose lease ran out
(their process died) as failed, code ``owner_lost``, so their followers and pollers get an end.
A process that loses a run's lease while alive (paused, cut off from Redis) stops the run and
stores nothing: the survivor's ``failed`` stays the run's end, stored and polled, everywhere.

A thin transport: what the events say is the encoder's business (``responses_encoder``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from iris.agent.core import Agent, TurnRequest
from iris.errors import StoreUnavailable, user_message
from iris.events import Event, TurnFailed
from iris.state.background import CANCEL_POLL, RunPublisher, SharedRuns
from iris.state.lease import Lease
from iris.surfaces.api.exchange import SSE_HEADERS, Running, TurnExchange, while_connected
from iris.surfaces.api.responses_encoder import failed_elsewhere
from iris.surfaces.api.sse import DONE, named_frames
from iris.tasks import OpenGroup, logged, stop_if_cancelled

log = logging.getLogger("iris.api")

Json = dict[str, Any]

OWNER_LOST = ("owner_lost", "the server running this response stopped")

# Stores the response of a run ended for its lost owner, with the conversation it was shared
# with (None: the request asked not to store it).
SaveLost = Callable[[Json, list[Json] | None], Awaitable[None]]


class RunWire(Protocol):
    """The Responses wire of a run: events in, wire events out, and the response so far."""

    def feed(self, event: Event) -> list[Json]: ...

    def stop(self, status: str, reason: str) -> list[Json]: ...

    def snapshot(self) -> Json: ...

    async def finished(self) -> None: ...


class BackgroundRun:
    def __init__(
        self,
        response_id: str,
        agent: Agent,
        request: TurnRequest,
        wire: RunWire,
        *,
        release: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
        shared: SharedRuns | None = None,
        source: AbstractAsyncContextManager[Running] | None = None,
    ) -> None:
        self.id = response_id
        self._source = source  # the events to run from (a held turn's leg); else a new turn
        self.events: list[Json] = []  # every wire event so far; events[n]["sequence_number"] == n
        self.ended_at: float | None = None  # clock time the run ended
        self._agent = agent
        self._request = request
        self._wire = wire
        self._release = release
        self._clock = clock
        self._changed = asyncio.Event()  # set (and replaced) whenever events or the end come
        self._stop: tuple[str, str] | None = None  # (status, reason) asked by cancel/shutdown
        self._task: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None  # renews the lease while the run runs
        # The lease was lost while the run ran: a survivor ends it in Redis (failed, owner_lost)
        # and stores it; this process keeps nothing of its own end, and answers from Redis.
        self.lost = False
        # Copies the run to Redis for the other processes (None: this process alone).
        self._publisher: RunPublisher | None = (
            None if shared is None else shared.publisher(response_id, wire.snapshot)
        )

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def snapshot(self) -> Json:
        return self._wire.snapshot()

    def start(self, tasks: OpenGroup, lease: Lease | None = None) -> None:
        """Run the turn in ``tasks`` (the surface's: a run outlives the request that began it),
        holding ``lease`` (the shared store's) until it ends."""
        self._task = tasks.create_task(self._run(), name=f"background {self.id}")
        if lease is not None and self._publisher is not None:
            self._publisher.lease = lease

            def lost() -> None:
                # Another process ends the run in Redis now: stop here, sharing nothing more.
                assert self._publisher is not None
                self.lost = True
                self._publisher.fence()
                tasks.create_task(self.stop("incomplete", "interrupted"))

            self._keeper = tasks.create_task(lease.keep(lost), name=f"background {self.id} lease")
        if self._publisher is not None:
            # Logged, not raised: a failure here must not cancel every run in the group.
            sharing = logged(self._publisher.run(), f"sharing background response {self.id}")
            tasks.create_task(sharing, name=f"background {self.id} shared")

    # Seconds ``stop`` waits for the turn to unwind (the upstream request to close).
    stop_wait = 5.0

    async def stop(self, status: str, reason: str) -> None:
        """End the run now (the upstream request closes) and wait until it has."""
        task = self._task
        if task is None or task.done():
            return
        self._stop = self._stop or (status, reason)
        task.cancel()
        await asyncio.wait([task], timeout=self.stop_wait)

    async def changed(self, within: float) -> bool:
        """Wait until new events or the end arrive; False after ``within`` seconds."""
        try:
            await asyncio.wait_for(self._changed.wait(), within)
        except TimeoutError:
            return False
        return True

    async def _run(self) -> None:
        try:
            try:
                async with self._source or self._agent.run(self._request) as turn:
                    async for event in turn:
                        self._add(self._wire.feed(event))
            except asyncio.CancelledError:
                if self._stop is None:
                    raise
                # Asked for: the turn's exit closed the upstream; the run ends as asked.
                self._add(self._wire.stop(*self._stop))
            except Exception as exc:
                # The agent reports failures as TurnFailed; anything else still ends the run
                # with a failed response, never one left in progress.
                log.exception("background turn failed outside the agent's event stream")
                code, message, retryable = user_message(exc)
                self._add(self._wire.feed(TurnFailed(code, message, retryable)))
            try:
                if not self.lost:  # else the survivor's end is the stored one
                    await self._wire.finished()
            except Exception:
                # Nobody awaits this task: the failure to store is logged, and the run still
                # ends, so its followers and pollers see the final response from memory.
                log.exception("could not store background response %s", self.id)
        finally:
            self.ended_at = self._clock()
            if self._keeper is not None:
                self._keeper.cancel()  # the publisher releases the lease once the end is shared
            self._release()
            self._notify()
            if self._publisher is not None:
                self._publisher.end()

    def _add(self, payloads: list[Json]) -> None:
        if payloads:
            self.events.extend(payloads)
            if self._publisher is not None:
                self._publisher.add(payloads)
            self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


class BackgroundRuns:
    """The runs a process knows, by response id, bounded by age and count once ended."""

    def __init__(
        self,
        *,
        ttl: float,
        keep: int,
        clock: Callable[[], float] = time.monotonic,
        shared: SharedRuns | None = None,
        save_lost: SaveLost | None = None,
    ) -> None:
        self._ttl = ttl
        self._save_lost = save_lost
        self._keep = keep
        self._clock = clock
        self._runs: dict[str, BackgroundRun] = {}
        self._tasks = OpenGroup()  # the runs' turns, from start to stop
        self.shared = shared  # every process's runs (``store.url``); None: this one's alone
        self._watcher: asyncio.Task[None] | None = None
        self._reaper: asyncio.Task[None] | None = None

    def add(self, run: BackgroundRun) -> None:
        self._prune()
        self._runs[run.id] = run

    def get(self, response_id: str) -> BackgroundRun | None:
        """The run this process answers for: not one whose lease it lost (Redis has the
        survivor's end of it)."""
        self._prune()
        run = self._runs.get(response_id)
        return None if run is None or run.lost else run

    def running(self) -> list[BackgroundRun]:
        return [run for run in self._runs.values() if not run.ended]

    async def start(self) -> None:
        await self._tasks.open()
        if self.shared is not None:
            watch = logged(self._watch(self.shared), "watching for background cancels")
            self._watcher = self._tasks.create_task(watch, name="background cancels")
            reap = logged(self._reap(self.shared), "ending background responses of lost owners")
            self._reaper = self._tasks.create_task(reap, name="background reaper")

    async def _watch(self, shared: SharedRuns) -> None:
        """Stop the runs another process was asked to cancel; keep running runs' shared
        events from expiring while they go quiet."""
        failing = False
        refreshed = self._clock()
        while True:
            stop_if_cancelled()  # shutdown must not wait on a cancellation lost in the store
            await asyncio.sleep(CANCEL_POLL)
            running = {run.id: run for run in self.running()}
            try:
                for response_id in await shared.cancelled(list(running)):
                    run = running[response_id]
                    self._tasks.create_task(run.stop("cancelled", "cancelled"))
                if self._clock() - refreshed > self._ttl / 3:
                    await shared.refresh(list(running))
                    refreshed = self._clock()
            except StoreUnavailable as exc:
                if not failing:
                    log.warning("checking for background responses to cancel failed: %s", exc)
                failing = True
            else:
                failing = False

    async def _reap(self, shared: SharedRuns) -> None:
        """Every ``store.lease / 2`` s, end the runs whose owner stopped renewing its lease."""
        failing = False
        while True:
            stop_if_cancelled()  # shutdown must not wait on a cancel redis-py swallowed
            await asyncio.sleep(shared.lease / 2)
            try:
                for response_id in await shared.orphans():
                    await self._end_lost(shared, response_id)
            except StoreUnavailable as exc:  # tried again next round: the entry stays
                if not failing:
                    log.warning("ending background responses of lost owners failed: %s", exc)
                failing = True
            except Exception:  # tried again next round, never the end of the reaper
                log.exception("ending background responses of lost owners failed")
            else:
                failing = False

    async def _end_lost(self, shared: SharedRuns, response_id: str) -> None:
        """End one run whose owner is gone, as a failed run ends (if this process is the one
        survivor that takes its lease, and it has not ended meanwhile)."""
        lease = await shared.take(response_id)
        if lease is None:
            return  # another survivor has it
        try:
            found = await shared.abandoned(response_id)
            if found is None:
                await shared.forget(response_id)  # ended (or expired): nothing to end
                return
            snapshot, conversation, sequence = found
            events = failed_elsewhere(snapshot, sequence, *OWNER_LOST)
            final = events[-1]["response"]
            log.warning("background response %s: its server stopped; ended as failed", response_id)
            if self._save_lost is not None:
                await self._save_lost(final, conversation)
            await shared.close(response_id, events, final)
        finally:
            with contextlib.suppress(StoreUnavailable):
                await shared.release(lease)

    def launch(self, run: BackgroundRun, lease: Lease | None = None) -> None:
        """Keep ``run`` and start its turn in the runs' task group (holding ``lease``)."""
        self.add(run)
        run.start(self._tasks, lease)

    async def stop(self) -> None:
        """Server shutdown: every running turn ends now as ``incomplete`` (interrupted), its
        output so far stored."""
        for task in (self._watcher, self._reaper):
            if task is not None:
                task.cancel()  # they sleep or wait on Redis: nothing to wait for
        self._watcher = self._reaper = None
        try:
            runs = self.running()
            if runs:
                await asyncio.gather(*(run.stop("incomplete", "interrupted") for run in runs))
        finally:
            await self._tasks.close()

    def _prune(self) -> None:
        now = self._clock()
        ended = sorted(
            (run for run in self._runs.values() if run.ended_at is not None),
            key=lambda run: run.ended_at or 0.0,
        )
        surplus = len(ended) - self._keep
        for number, run in enumerate(ended):
            if number < surplus or now - (run.ended_at or now) > self._ttl:
                del self._runs[run.id]


class _Follower(Response):
    """An ASGI response that follows a run as SSE until it ends; the client leaving ends only
    this stream, never the run."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await while_connected(receive, self._follow(send), self._wind_down)

    async def _follow(self, send: Send) -> None:
        raise NotImplementedError

    async def _wind_down(self, follow: asyncio.Task[None]) -> bool:
        raise NotImplementedError

    @staticmethod
    async def _events(send: Send, batch: list[Json]) -> None:
        await send({"type": "http.response.body", "body": named_frames(batch), "more_body": True})

    @staticmethod
    async def _done(send: Send) -> None:
        await send({"type": "http.response.body", "body": DONE, "more_body": False})

    @staticmethod
    async def _keep_alive(send: Send) -> None:
        # Silence (an agent tool running): a comment keeps idle-timeout proxies open.
        await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})


class RunStream(_Follower):
    """The events of ``run`` after sequence number ``after``, then the live ones until the run
    ends."""

    def __init__(self, run: BackgroundRun, after: int) -> None:
        super().__init__()
        self._run = run
        self._after = after

    async def _wind_down(self, follow: asyncio.Task[None]) -> bool:
        # The server's graceful shutdown ran out of patience before the turn ended: it ends
        # now as interrupted, and this follower still gets the end of it.
        await self._run.stop("incomplete", "interrupted")
        await asyncio.wait([follow], timeout=2.0)
        return True

    async def _follow(self, send: Send) -> None:
        run = self._run
        cursor = self._after + 1
        while True:
            if cursor < len(run.events):
                batch, cursor = run.events[cursor:], len(run.events)
                await self._events(send, batch)
            elif run.ended:
                await self._done(send)
                return
            elif not await run.changed(TurnExchange.heartbeat):
                await self._keep_alive(send)


class RemoteRunStream(_Follower):
    """``RunStream`` for a run another process runs: its events after ``after`` from Redis,
    then the live ones until it ends. Ends early (``[DONE]``) if the run's shared events
    expire (its process died and ``background_ttl`` passed)."""

    def __init__(self, runs: SharedRuns, response_id: str, after: int) -> None:
        super().__init__()
        self._runs = runs
        self._id = response_id
        self._after = after

    async def _wind_down(self, follow: asyncio.Task[None]) -> bool:
        return False  # the run is another process's: this server's shutdown ends the following

    async def _follow(self, send: Send) -> None:
        cursor = f"{self._after + 1}-0"
        entries, ended = await self._runs.read(self._id, cursor, block=None)
        while True:
            events = [json.loads(fields["event"]) for _, fields in entries if "event" in fields]
            if events:
                await self._events(send, events)
            if entries:
                cursor = entries[-1][0]
            if ended:
                await self._done(send)
                return
            entries, ended = await self._runs.read(self._id, cursor, block=TurnExchange.heartbeat)
            stop_if_cancelled()  # shutdown must not wait on a cancellation lost in the read
            if not entries:
                if await self._runs.state(self._id) is None:
                    ended = True  # its events are gone: nothing more will come
                    continue
                await self._keep_alive(send)

"""Background responses across processes: a run's events in a Redis Stream, so any process can
poll it, follow it from a sequence number and cancel it.

The process that runs the turn keeps the run in memory as without Redis (``BackgroundRun``),
and a ``RunPublisher`` copies it out, per response id (the run's keys share the hash tag
``{response:<id>}``, so each ``MULTI`` below stays in one cluster slot):

- ``{response:<id>}:events`` a stream: event ``n`` (its ``sequence_number``) is entry ``{n+1}-0``,
  field ``event``; a last entry with field ``end`` marks the end of the run;
- ``{response:<id>}:run`` a hash: ``snapshot`` (the response as it stands), ``owner`` (the process
  that runs it) and ``ended`` once it has;
- ``{response:<id>}:cancel`` set by another process asked to cancel it: the owner's ``watch``
  reads those of its running runs every ``CANCEL_POLL`` seconds and stops them;
- ``{response:<id>}:lease`` the owner's lease on the run (a ``Lease``, renewed while it runs)
  and ``response:running`` the registry of running runs (id → lease token), which spans runs
  and so is written on its own: the entry before the lease (``announce``), and dropped after
  the end is written.

An owner that dies (kill -9) stops renewing: its lease expires within ``store.lease`` seconds.
Every process's reaper finds such runs (``orphans``), takes the lease (``take``: exactly one
survivor) and ends the run for it (``close``): the final events on its stream, its snapshot
ended, as a failed run ends.

The publisher writes in batches: whatever events came while the last write was in flight go
in one ``MULTI`` with one snapshot, so a fast stream costs a write per round trip, not a
snapshot per token. The keys expire ``background_ttl`` after the run's last write (refreshed
while it runs), so the events of an ended run are kept as long as in memory, and those of a
process that died go too. A follower elsewhere (``read``) takes the range after its sequence
number, then blocks on the stream (``XREAD BLOCK`` on ``store.following``) until the end entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any, cast

from redis.typing import EncodableT, FieldT

from iris.state.lease import Lease
from iris.state.redis_store import ERRORS, RedisStore, translated
from iris.tasks import stop_if_cancelled

log = logging.getLogger(__name__)

Json = dict[str, Any]

CANCEL_POLL = 0.2  # seconds a cancel asked on another process waits to be seen, at most
RETRY = 0.5  # seconds between two tries of a publisher whose write failed
GIVE_UP = 5.0  # seconds an ended run's publisher keeps trying (shutdown must not wait longer)

Entry = tuple[str, dict[str, str]]


class SharedRuns:
    """The background runs of every process, as this process sees them in Redis."""

    def __init__(self, store: RedisStore, *, ttl: float, lease: float = 10.0) -> None:
        self.store = store
        self.ttl = ttl
        self.lease = lease  # seconds an owner holds a run's lease without renewing it
        self.registry = store.key("response", "running")

    def _key(self, response_id: str, part: str) -> str:
        return self.store.tagged_key(f"response:{response_id}", part)

    def events_key(self, response_id: str) -> str:
        return self._key(response_id, "events")

    def run_key(self, response_id: str) -> str:
        return self._key(response_id, "run")

    def cancel_key(self, response_id: str) -> str:
        return self._key(response_id, "cancel")

    def lease_key(self, response_id: str) -> str:
        return self._key(response_id, "lease")

    def publisher(self, response_id: str, snapshot: Callable[[], Json]) -> RunPublisher:
        return RunPublisher(self, response_id, snapshot)

    async def announce(
        self, response_id: str, snapshot: Json, conversation: list[Json] | None
    ) -> Lease:
        """Share a run that is about to start (its publisher takes over from there), with the
        conversation a survivor stores it with (None: not stored); this process's lease on it."""
        fields: dict[FieldT, EncodableT] = {
            "snapshot": json.dumps(snapshot),
            "owner": self.store.process_id,
        }
        if conversation is not None:
            fields["conversation"] = json.dumps(conversation)
        lease = Lease(self.store, self.lease_key(response_id), self.lease)
        ms = max(1, int(self.lease * 1000))
        with translated(self.store.url):
            async with self.store.aio.pipeline(transaction=True) as pipe:
                pipe.hset(self.run_key(response_id), mapping=fields)
                pipe.expire(self.run_key(response_id), self.seconds)
                await pipe.execute()
            # A fresh id: nobody holds its lease yet. Listed first: never a lease unlisted.
            await self.store.aio.hset(self.registry, response_id, lease.token)
            await self.store.aio.set(lease.key, lease.token, nx=True, px=ms)
        return lease

    async def orphans(self) -> list[str]:
        """Running runs whose lease is gone: their owner stopped renewing."""
        with translated(self.store.url):
            running = [str(i) for i in await self.store.aio.hkeys(self.registry)]
            if not running:
                return []
            async with self.store.aio.pipeline(transaction=False) as pipe:
                for each in running:  # one key at a time: each lease is in its run's slot
                    pipe.get(self.lease_key(each))
                holders = cast(list[str | None], await pipe.execute())
        return [i for i, holder in zip(running, holders, strict=True) if holder is None]

    async def take(self, response_id: str) -> Lease | None:
        """The lease of a run whose owner is gone, now this process's; None if another
        survivor took it first."""
        lease = Lease(self.store, self.lease_key(response_id), self.lease)
        with translated(self.store.url):
            return lease if await lease.acquire() else None

    async def abandoned(self, response_id: str) -> tuple[Json, list[Json] | None, int] | None:
        """A run to end for its lost owner: its snapshot, the conversation to store it with,
        and the next sequence number; None if it has ended (or expired) meanwhile."""
        with translated(self.store.url):
            found = cast(
                list[str | None],
                await self.store.aio.hmget(
                    self.run_key(response_id), ["snapshot", "ended", "conversation"]
                ),
            )
            last = cast(
                list[Entry], await self.store.aio.xrevrange(self.events_key(response_id), count=1)
            )
        snapshot, ended, conversation = found
        if snapshot is None or ended is not None:
            return None
        # Event n is entry n+1: the next number is the last entry's.
        after = int(last[0][0].split("-")[0]) if last else 0
        return (
            json.loads(snapshot),
            (None if conversation is None else json.loads(conversation)),
            after,
        )

    async def close(self, response_id: str, events: list[Json], snapshot: Json) -> None:
        """End a run for its lost owner: ``events`` and the end on its stream, ``snapshot``
        as its final state, and no longer running."""
        events_key, run_key = self.events_key(response_id), self.run_key(response_id)
        fields: dict[FieldT, EncodableT] = {"snapshot": json.dumps(snapshot), "ended": "1"}
        with translated(self.store.url):
            async with self.store.aio.pipeline(transaction=True) as pipe:
                for event in events:
                    pipe.xadd(
                        events_key,
                        {"event": json.dumps(event)},
                        id=f"{event['sequence_number'] + 1}-0",
                    )
                pipe.xadd(events_key, {"end": "1"})
                pipe.hset(run_key, mapping=fields)
                pipe.expire(events_key, self.seconds)
                pipe.expire(run_key, self.seconds)
                await pipe.execute()
            await self.store.aio.hdel(self.registry, response_id)

    async def release(self, lease: Lease) -> None:
        with translated(self.store.url):
            await lease.release()

    async def forget(self, response_id: str) -> None:
        """Drop a run from the registry (it ended, or its keys expired)."""
        with translated(self.store.url):
            await self.store.aio.hdel(self.registry, response_id)

    async def state(self, response_id: str) -> tuple[Json, bool] | None:
        """A run's snapshot and whether it ended; None when no process has it (any more)."""
        with translated(self.store.url):
            found = cast(
                list[str | None],
                await self.store.aio.hmget(self.run_key(response_id), ["snapshot", "ended"]),
            )
        snapshot, ended = found
        return None if snapshot is None else (json.loads(snapshot), ended is not None)

    async def cancel(self, response_id: str, within: float) -> Json | None:
        """Ask the process that runs ``response_id`` to cancel it, and wait (at most
        ``within`` seconds) for it to end; the run's snapshot then, None if it is unknown."""
        state = await self.state(response_id)
        if state is None or state[1]:
            return None if state is None else state[0]
        with translated(self.store.url):
            await self.store.aio.set(self.cancel_key(response_id), "1", ex=max(1, int(self.ttl)))
        deadline = time.monotonic() + within
        cursor = "0-0"
        while time.monotonic() < deadline:
            entries, ended = await self.read(response_id, cursor, block=CANCEL_POLL)
            if entries:
                cursor = entries[-1][0]
            if ended:
                break
        state = await self.state(response_id)
        return None if state is None else state[0]

    async def cancelled(self, response_ids: list[str]) -> list[str]:
        """Which of these (this process's running runs) another process asked to cancel."""
        if not response_ids:
            return []
        with translated(self.store.url):
            async with self.store.aio.pipeline(transaction=False) as pipe:
                for each in response_ids:  # each in its run's slot
                    pipe.get(self.cancel_key(each))
                marks = cast(list[str | None], await pipe.execute())
            asked = [i for i, mark in zip(response_ids, marks, strict=True) if mark is not None]
            if asked:
                async with self.store.aio.pipeline(transaction=False) as pipe:
                    for each in asked:
                        pipe.delete(self.cancel_key(each))
                    await pipe.execute()
        return asked

    async def refresh(self, response_ids: list[str]) -> None:
        """Keep running runs' keys from expiring while their turns go quiet (a long tool)."""
        if not response_ids:
            return
        with translated(self.store.url):
            async with self.store.aio.pipeline(transaction=False) as pipe:
                for each in response_ids:
                    pipe.expire(self.events_key(each), self.seconds)
                    pipe.expire(self.run_key(each), self.seconds)
                await pipe.execute()

    @property
    def seconds(self) -> int:
        return max(1, int(self.ttl))

    async def read(
        self, response_id: str, cursor: str, *, block: float | None
    ) -> tuple[list[Entry], bool]:
        """The entries after ``cursor`` (exclusive), waiting up to ``block`` seconds for one
        when there are none yet; and whether the end entry was among them."""
        key = self.events_key(response_id)
        with translated(self.store.url):
            if block is None:
                entries = cast(list[Entry], await self.store.aio.xrange(key, f"({cursor}", "+"))
            else:
                try:
                    reply = cast(
                        list[tuple[str, list[Entry]]] | None,
                        await self.store.following_for(key).xread(
                            {key: cursor}, block=max(1, int(block * 1000))
                        ),
                    )
                except ERRORS:
                    if self.store.mode == "cluster":
                        await self.store.slot_map_stale()
                    raise
                entries = reply[0][1] if reply else []
        ended = bool(entries) and "end" in entries[-1][1]
        return entries, ended


class RunPublisher:
    """Copies one run's events, snapshot and end to Redis, a batch per write."""

    def __init__(self, runs: SharedRuns, response_id: str, snapshot: Callable[[], Json]) -> None:
        self._runs = runs
        self._id = response_id
        self._snapshot = snapshot
        self._pending: list[Json] = []
        self._ended = False
        self._wake = asyncio.Event()
        self._failing = False
        self.lease: Lease | None = None  # this process's lease on the run, released at its end
        self._fenced = False

    def fence(self) -> None:
        """The lease was lost: a survivor ends the run in Redis; write nothing more."""
        self._fenced = True
        self._wake.set()

    def add(self, events: list[Json]) -> None:
        self._pending += events
        self._wake.set()

    def end(self) -> None:
        self._ended = True
        self._wake.set()

    async def run(self) -> None:
        """Write until the run has ended and all of it is written, or ``GIVE_UP`` seconds after
        it ended while Redis is away (its stored response is saved apart: ``finished``)."""
        given_up: float | None = None
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._fenced:
                return
            batch, ended = self._pending, self._ended
            self._pending = []
            try:
                await self._write(batch, ended)
                stop_if_cancelled()  # a stopping server must not wait on a cancellation lost there
            except ERRORS as exc:
                if not self._failing:
                    log.warning("background response %s not shared: %s", self._id, exc)
                self._failing = True
                self._pending = batch + self._pending
                if ended:
                    given_up = given_up or time.monotonic() + GIVE_UP
                    if time.monotonic() > given_up:
                        log.warning("background response %s: its end was not shared", self._id)
                        return
                await asyncio.sleep(RETRY)
                self._wake.set()
                continue
            self._failing = False
            if ended:
                if self.lease is not None:
                    # On failure it expires by itself; the run is out of the registry already.
                    with contextlib.suppress(*ERRORS):
                        await self.lease.release()
                return

    async def _write(self, batch: list[Json], ended: bool) -> None:
        runs, events_key = self._runs, self._runs.events_key(self._id)
        if self._failing and batch:
            # A write whose reply was lost may have gone through: never add an entry twice.
            last = cast(list[Entry], await runs.store.aio.xrevrange(events_key, count=1))
            top = int(last[0][0].split("-")[0]) if last else 0
            batch = [e for e in batch if e["sequence_number"] + 1 > top]
        fields: dict[FieldT, EncodableT] = {
            "snapshot": json.dumps(self._snapshot()),
            "owner": runs.store.process_id,
        }
        if ended:
            fields["ended"] = "1"
        async with runs.store.aio.pipeline(transaction=True) as pipe:
            for event in batch:
                entry = f"{event['sequence_number'] + 1}-0"
                pipe.xadd(events_key, {"event": json.dumps(event)}, id=entry)
            if ended:
                pipe.xadd(events_key, {"end": "1"})
            pipe.hset(runs.run_key(self._id), mapping=fields)
            pipe.expire(events_key, runs.seconds)
            pipe.expire(runs.run_key(self._id), runs.seconds)
            await pipe.execute()
        if ended:  # ended: never the reaper's (the registry is in a slot of its own)
            await runs.store.aio.hdel(runs.registry, self._id)

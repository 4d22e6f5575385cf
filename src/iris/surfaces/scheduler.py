"""The scheduler of ``iris serve``: claims each due run, has its chat's surface run it, and
records the next.

Every ``poll`` seconds (sooner when a schedule is added here) it reads the runs due now
(``iris.state.schedules``), claims each one this process can deliver (``RunSurface.ready``: a
chat platform only where its bot is connected) and runs it in a task of its supervisor. A run
is a turn of the chat's conversation (the surface's ``run``): streamed into the chat like a
reply, marked as scheduled. While it runs its claim is renewed; if the claim is lost (the store
gave it to another process after this one stalled) the run is cancelled here, and the other
process runs it again.

What "once" means:

- a run is finished once: ``finish`` records the next run only while the claim holds;
- a run whose process died before finishing it is claimed again once its claim expires and
  run again, with a note that its first try was cut;
- a run that was due before this process started (every process was down) is a missed run:
  ``schedules.missed: run_once`` runs it once, with a note ("was due at 08:00"), however many
  times a recurring rule was due meanwhile; ``skip`` only moves it on to its next time.

A run that cannot be delivered (the platform is down, the chat is gone, the bot was removed)
is retried by the surface with backoff, then reported: in the log, in
``iris_schedule_runs_total{outcome="undelivered"}`` and in the chat's next delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable
from zoneinfo import ZoneInfo

from starlette.routing import BaseRoute

from iris.config import SchedulesConfig
from iris.errors import StoreUnavailable
from iris.observability import metrics
from iris.state.schedules import Claim, Schedule, Schedules
from iris.tasks import Supervisor, stop_if_cancelled

log = logging.getLogger(__name__)

POLL = 1.0  # seconds between two looks at what is due
Outcome = Literal["delivered", "undelivered", "failed", "refused"]


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a schedule: its prompt, and a note said before its reply ("" on time)."""

    schedule: Schedule
    note: str = ""


@dataclass(frozen=True, slots=True)
class Delivery:
    outcome: Outcome
    reason: str = ""  # why it was not delivered, for the log and the chat's next delivery


@runtime_checkable
class RunSurface(Protocol):
    """A surface that runs scheduled runs in its chats (the chat platforms, the iris socket)."""

    @property
    def run_targets(self) -> tuple[str, ...]:
        """The target surfaces it delivers to (``iris``, ``telegram``...)."""
        ...

    def ready(self, target: Mapping[str, Any]) -> bool:
        """Can this process deliver to ``target`` now?"""
        ...

    async def run(self, run: Run) -> Delivery: ...


def local_time(at: float, zone: str, *, day: bool = True) -> str:
    """``at`` on ``zone``'s wall clock, as the chat's answers show it."""
    shown = datetime.fromtimestamp(at, ZoneInfo(zone))
    return shown.strftime("%a %Y-%m-%d %H:%M" if day else "%H:%M") + f" {zone}"


class Scheduler:
    """Runs the due runs of every chat (``iris.state.schedules``) through ``surfaces``."""

    def __init__(
        self,
        schedules: Schedules,
        config: SchedulesConfig,
        surfaces: Mapping[str, RunSurface],
        *,
        lease: float = 10.0,
        clock: Callable[[], float] = time.time,
        poll: float = POLL,
    ) -> None:
        self.schedules = schedules
        self.config = config
        self.surfaces = surfaces  # by target surface: "iris", "telegram", ...
        self.lease = lease
        self.clock = clock
        self.poll = poll
        self.started_at = clock()  # a run due before this was missed (every process was down)
        self._supervisor = Supervisor()
        self._running: set[str] = set()  # schedules whose run goes on here
        self._wake = asyncio.Event()

    # -- ServerSurface ------------------------------------------------------------------------
    def routes(self) -> list[BaseRoute]:
        return []

    async def start(self) -> None:
        self.started_at = self.clock()
        self._supervisor.create_task(self._watch(), name="scheduler")

    async def stop(self) -> None:
        await self._supervisor.close()

    def wake(self) -> None:
        """A schedule was added or moved: look again now."""
        self._wake.set()

    async def _watch(self) -> None:
        while True:
            try:
                await self.tick()
            except StoreUnavailable as exc:
                log.warning("scheduled runs not read: %s", exc.message)
            except Exception:
                log.exception("the scheduler failed; it looks again shortly")
            stop_if_cancelled()  # a stopping server must not wait on a cancellation lost there
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll)
            self._wake.clear()

    # -- runs ---------------------------------------------------------------------------------
    async def tick(self) -> list[asyncio.Task[str]]:
        """Claim every run due now that this process can deliver and start it; their tasks."""
        now = self.clock()
        started: list[asyncio.Task[str]] = []
        for schedule in await self.schedules.due(now):
            surface = self.surfaces.get(str(schedule.target.get("surface")))
            if (
                schedule.id in self._running
                or surface is None
                or not surface.ready(schedule.target)
            ):
                continue
            claim = await self.schedules.claim(schedule, self.lease, now)
            if claim is None:
                continue  # another process runs it, or ran it since
            self._running.add(schedule.id)
            work = self._run(claim, surface, now)
            started.append(self._supervisor.create_task(work, name=f"schedule-{schedule.id}"))
        return started

    async def _run(self, claim: Claim, surface: RunSurface, now: float) -> str:
        schedule = claim.schedule
        try:
            outcome = await self._attempt(claim, surface, now)
        except StoreUnavailable as exc:
            log.warning("scheduled run %s not finished: %s", schedule.id, exc.message)
            outcome = "failed"
        finally:
            self._running.discard(schedule.id)
        metrics.schedule_run(outcome)
        return outcome

    async def _attempt(self, claim: Claim, surface: RunSurface, now: float) -> str:
        schedule = claim.schedule
        missed = schedule.next_at < self.started_at and schedule.attempts == 1
        if missed and self.config.missed == "skip":
            due = local_time(schedule.next_at, schedule.zone)
            log.info("scheduled run %s due at %s skipped (schedules.missed)", schedule.id, due)
            await self.schedules.finish(claim, schedule.following(self.clock()))
            return "skipped"
        delivery = await self._deliver(claim, surface, Run(schedule, _note(schedule, missed)))
        if delivery is None:
            return "lost"
        if delivery.outcome != "delivered":
            await self._report(schedule, delivery)
        # A missed recurring run runs once: the next is the first after now.
        following = schedule.following(self.clock() if missed else schedule.next_at)
        if not await self.schedules.finish(claim, following):
            log.warning("scheduled run %s: claim lost before it was recorded", schedule.id)
            return "lost"
        return delivery.outcome

    async def _deliver(self, claim: Claim, surface: RunSurface, run: Run) -> Delivery | None:
        """``surface.run(run)`` while the claim is renewed; None if the claim was lost (the
        run is cancelled here: another process runs it)."""
        running = self._supervisor.create_task(surface.run(run))
        keeping = self._supervisor.create_task(self._keep(claim))
        try:
            await asyncio.wait({running, keeping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            keeping.cancel()
            if not running.done():
                running.cancel()
            await asyncio.gather(running, keeping, return_exceptions=True)
        if running.cancelled() or running.exception() is not None:
            if not running.cancelled():
                log.error(
                    "scheduled run %s failed", claim.schedule.id, exc_info=running.exception()
                )
                return Delivery("failed", "internal error")
            return None
        return running.result()

    async def _keep(self, claim: Claim) -> None:
        """Renew the claim every third of the lease; return once it cannot be renewed."""
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                if not await self.schedules.renew(claim, self.lease, self.clock()):
                    log.warning("scheduled run %s: claim taken over", claim.schedule.id)
                    return
            except StoreUnavailable as exc:
                log.warning("scheduled run %s: claim not renewed: %s", claim.schedule.id, exc)
            stop_if_cancelled()

    async def _report(self, schedule: Schedule, delivery: Delivery) -> None:
        """Say in the log, and in the chat's next delivery, that a run did not reach it."""
        due = local_time(schedule.next_at, schedule.zone)
        log.warning(
            "scheduled run %s in %s (due %s) %s: %s",
            schedule.id,
            schedule.chat,
            due,
            delivery.outcome,
            delivery.reason,
        )
        note = f"⚠️ The scheduled run {schedule.id} due {due} was not delivered: {delivery.reason}"
        try:
            await self.schedules.note(schedule.chat, note)
        except StoreUnavailable as exc:
            log.warning("note for %s not kept: %s", schedule.chat, exc.message)


def _note(schedule: Schedule, missed: bool) -> str:
    """What a late run says before its reply."""
    if missed:
        return f"was due at {local_time(schedule.next_at, schedule.zone)}"
    if schedule.attempts > 1:
        return (
            f"run again: its first try (due {local_time(schedule.next_at, schedule.zone)}) was cut"
        )
    return ""

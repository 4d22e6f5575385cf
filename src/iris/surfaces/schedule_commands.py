"""The schedule commands of every chat: ``/remind``, ``/every``, ``/schedules``,
``/unschedule``, ``/tz``.

``answer`` runs one of them for a chat (a ``Desk``: the chat's store of schedules, who asks,
where the runs go) and returns the text to answer with. Every answer that names a time names
it on the asker's wall clock, with the zone (``/tz``, else the server's). Limits, each refused
in one line that says which: ``schedules.max_per_chat`` schedules in a chat and as many per
user across chats; a recurring rule may not run more often than every
``schedules.min_interval_s`` seconds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from iris.config import SchedulesConfig
from iris.formats.timespec import TimeSpecError, next_after, rule, shortest_gap, when
from iris.state.schedules import Schedule, Schedules, new_id
from iris.surfaces.commands import Command
from iris.surfaces.scheduler import local_time

COMMANDS = frozenset({"remind", "every", "schedules", "unschedule", "tz"})
PREVIEW = 60  # characters of a prompt shown in /schedules


def server_zone() -> str:
    """The server's time zone by name (``TZ``, then ``/etc/localtime``), else UTC."""
    named = os.environ.get("TZ", "").lstrip(":")
    if named and _zone(named) is not None:
        return named
    try:
        linked = str(Path("/etc/localtime").resolve())
    except OSError:
        return "UTC"
    name = linked.partition("zoneinfo/")[2]
    return name if name and _zone(name) is not None else "UTC"


def _zone(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


@dataclass
class Desk:
    """What the schedule commands of one chat act on."""

    schedules: Schedules
    config: SchedulesConfig
    chat: str  # the conversation's session key
    user: str  # ``<surface>:<user id>``
    target: Mapping[str, Any]  # where its runs are delivered (``iris.surfaces.scheduler``)
    default_zone: str = field(default_factory=server_zone)
    clock: Callable[[], float] = time.time
    added: Callable[[], None] = lambda: None  # the scheduler looks again

    async def zone(self) -> str:
        return await self.schedules.zone(self.user) or self.default_zone


async def answer(command: Command, desk: Desk) -> str:
    """Run a schedule command; the answer for the user (raises ``StoreUnavailable``)."""
    match command.name:
        case "remind":
            return await _remind(command.arg, desk)
        case "every":
            return await _every(command.arg, desk)
        case "schedules":
            return await _listed(desk)
        case "unschedule":
            return await _unschedule(command.arg, desk)
        case "tz":
            return await _tz(command.arg, desk)
        case _:
            raise AssertionError(f"not a schedule command: {command.name}")


async def _room(desk: Desk) -> str | None:
    """Why no schedule may be added now (a limit), or None."""
    most = desk.config.max_per_chat
    if len(await desk.schedules.of_chat(desk.chat)) >= most:
        return f"this chat has {most} schedules, the most it may (schedules.max_per_chat)"
    if await desk.schedules.count_user(desk.user) >= most:
        return f"you have {most} schedules, the most one person may (schedules.max_per_chat)"
    return None


async def _remind(arg: str, desk: Desk) -> str:
    zone = await desk.zone()
    now = desk.clock()
    try:
        due, text = when(arg, now, ZoneInfo(zone))
    except TimeSpecError as exc:
        return f"/remind: {exc}"
    if not text.strip():
        return "/remind: what should I do then? usage: /remind <when> <text>"
    if due <= now:
        return f"/remind: {local_time(due, zone)} has passed"
    refusal = await _room(desk)
    if refusal is not None:
        return f"/remind refused: {refusal}"
    schedule = Schedule(new_id(), desk.chat, desk.user, desk.target, text, "", zone, due)
    await desk.schedules.add(schedule)
    desk.added()
    return f"⏰ {schedule.id}: {local_time(due, zone)}: {text}"


async def _every(arg: str, desk: Desk) -> str:
    zone = await desk.zone()
    now = desk.clock()
    try:
        cron, prompt = rule(arg)
    except TimeSpecError as exc:
        return f"/every: {exc}"
    if not prompt.strip():
        return "/every: what should I do each time? usage: /every <cron or phrase> <prompt>"
    gap = shortest_gap(cron, now, ZoneInfo(zone))
    least = desk.config.min_interval_s
    if gap < least:
        return (
            f"/every refused: `{cron.text}` runs every {gap:g}s; the shortest allowed is "
            f"{least:g}s (schedules.min_interval_s)"
        )
    due = next_after(cron, now, ZoneInfo(zone))
    if due is None:
        return f"/every: `{cron.text}` never runs"
    refusal = await _room(desk)
    if refusal is not None:
        return f"/every refused: {refusal}"
    schedule = Schedule(new_id(), desk.chat, desk.user, desk.target, prompt, cron.text, zone, due)
    await desk.schedules.add(schedule)
    desk.added()
    return f"🔁 {schedule.id}: `{cron.text}` ({zone}), first {local_time(due, zone)}: {prompt}"


async def _listed(desk: Desk) -> str:
    zone = await desk.zone()
    found = await desk.schedules.of_chat(desk.chat)
    if not found:
        return f"no schedules in this chat (your time zone: {zone})"
    lines = [f"schedules (times in {zone}):"]
    for s in found:
        rule_text = f"every `{s.cron}`" if s.cron else "once"
        shown = local_time(s.next_at, zone).removesuffix(f" {zone}")
        text = s.text if len(s.text) <= PREVIEW else s.text[: PREVIEW - 1] + "…"
        lines.append(f"{s.id}  next {shown}  {rule_text}  {text}")
    return "\n".join(lines)


async def _unschedule(arg: str, desk: Desk) -> str:
    schedule_id = arg.strip()
    if not schedule_id:
        return "usage: /unschedule <id> (the ids are in /schedules)"
    if await desk.schedules.remove(desk.chat, schedule_id):
        return f"removed {schedule_id}"
    return f"no schedule {schedule_id!r} in this chat (see /schedules)"


async def _tz(arg: str, desk: Desk) -> str:
    name = arg.strip()
    if not name:
        zone = await desk.zone()
        return f"your time zone: {zone} (now {local_time(desk.clock(), zone, day=False)})"
    if _zone(name) is None:
        return f"/tz: unknown time zone {name!r}; say e.g. /tz Europe/Berlin"
    moved = await desk.schedules.set_zone(desk.user, name, desk.clock())
    desk.added()
    note = f"; {moved} recurring schedule(s) now follow it" if moved else ""
    return f"your time zone: {name} (now {local_time(desk.clock(), name, day=False)}){note}"

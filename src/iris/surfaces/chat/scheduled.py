"""Scheduled runs in a chat (``/remind``, ``/every``: ``iris.surfaces.scheduler``): the message a
run stands for, its first message (``⏰`` and the prompt, tried with backoff), what the chat was
not told before, and the chat's schedules as its commands see them (a ``Desk``).

``ChatSurface.run`` puts them together: after the first message, the run's turn goes through
the chat's conversation like a message's, under ``server.max_turns`` in the platform's line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import cast

from iris.errors import StoreUnavailable
from iris.runtime import Runtime
from iris.state.schedules import Schedules
from iris.surfaces.chat.platforms.base import IncomingMessage, PlatformError
from iris.surfaces.schedule_commands import Desk
from iris.surfaces.scheduler import Delivery, Run

log = logging.getLogger(__name__)

# Seconds between the tries of a scheduled run's first message (then: undelivered).
RETRY_DELAYS = (2.0, 10.0, 30.0)


def run_message(run: Run, platform: str) -> IncomingMessage:
    """The message a run stands for: its prompt, from the user who scheduled it, in the chat
    (and thread) it was scheduled in."""
    target = run.schedule.target
    return IncomingMessage(
        platform=platform,
        chat_id=str(target["chat_id"]),
        user_id=str(target.get("user_id", "")),
        text=run.schedule.text,
        user_name=str(target.get("user_name", "")),
        is_group=bool(target.get("is_group", False)),
        thread=cast(dict[str, str], target.get("thread") or {}),
    )


async def first_message(
    run: Run,
    send: Callable[[str], Awaitable[None]],
    schedules: Schedules | None,
    session: str,
    retry_delays: tuple[float, ...],
) -> Delivery | None:
    """Send the run's marker (with what the chat was not told before), retried with
    backoff; the failure, if every try failed."""
    notes = await schedules.notes(session) if schedules else []
    text = scheduled_marker(run, notes)
    for delay in (*retry_delays, None):
        try:
            await send(text)
            return None
        except PlatformError as exc:
            log.warning(
                "scheduled run in %s not delivered: %s", run.schedule.target["chat_id"], exc
            )
            if delay is None:
                for note in notes:  # told at the next delivery that works
                    assert schedules is not None
                    await schedules.note(session, note)
                return Delivery("undelivered", str(exc) or type(exc).__name__)
            await asyncio.sleep(delay)
    return None


def scheduled_marker(run: Run, notes: list[str]) -> str:
    """The first message of a scheduled run on a chat platform: what the chat was not told
    before, then ``⏰`` with the prompt (and why it is late, when it is)."""
    late = f" ({run.note})" if run.note else ""
    return "\n".join([*notes, f"⏰ {run.schedule.text}{late}"])


async def untold(schedules: Schedules | None, session: str) -> list[str]:
    """What the chat was not told before (a scheduled run that was not delivered), taken from
    the store (each is told once); none when the store cannot say."""
    if schedules is None:
        return []
    try:
        return await schedules.notes(session)
    except StoreUnavailable as exc:
        log.warning("notes of %s not read: %s", session, exc.message)
        return []


def desk(runtime: Runtime, message: IncomingMessage, session: str) -> Desk | None:
    """The chat's schedules, for its commands (None: the store keeps none)."""
    if runtime.schedules is None:
        return None
    target = {
        "surface": message.platform,
        "chat_id": message.chat_id,
        "thread": dict(message.thread),
        "is_group": message.is_group,
        "user_id": message.user_id,
        "user_name": message.user_name,
    }
    return Desk(
        runtime.schedules,
        runtime.config.schedules,
        session,
        f"{message.platform}:{message.user_id}",
        target,
        added=runtime.schedule_added,
    )

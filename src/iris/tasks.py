"""Task lifetimes: the task group every part of Iris runs its concurrent work in.

Every task belongs to an ``asyncio.TaskGroup`` owned by what it serves (a turn, an exchange, a
connection, a room, the app): leaving the group's ``async with`` cancels and awaits whatever
is still running, so nothing outlives its owner. ``task_group`` is that group, with one rule
added: a group that failed for a single reason raises that exception itself, not an
``ExceptionGroup`` of one, so callers keep catching ``StoreUnavailable`` or a provider error as
before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Coroutine
from typing import Any


@contextlib.asynccontextmanager
async def task_group() -> AsyncGenerator[asyncio.TaskGroup]:
    """An ``asyncio.TaskGroup`` that raises a lone failure as itself."""
    try:
        async with asyncio.TaskGroup() as group:
            yield group
    except BaseExceptionGroup as failed:
        if len(failed.exceptions) == 1:
            raise failed.exceptions[0] from None
        raise


async def logged(work: Coroutine[Any, Any, None], what: str) -> None:
    """Run ``work``; log its failure instead of raising it.

    For a child of a long-lived group (a surface's, from start to stop): a child that raises
    cancels its group and the group's owner, and one message's bug must not end every chat."""
    try:
        await work
    except Exception:
        logging.getLogger(__name__).exception("%s failed", what)

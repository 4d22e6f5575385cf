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
from collections.abc import AsyncGenerator


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

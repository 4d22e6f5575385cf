"""The typing indicator of one turn, as a lease: on while the turn holds it, off when released.

Platforms expire the indicator after a few seconds (Telegram ~5 s) and clear it on any bot
message, so the lease re-sends it every ``every`` seconds. It has one cancellation point
(``release``, also on leaving the ``async with``) and a hard ``limit``, so a stuck turn cannot
leave "typing…" on for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping

from iris.surfaces.chat.platform import ChatPlatform, PlatformError, PlatformRateLimited

log = logging.getLogger(__name__)


class TypingLease:
    def __init__(
        self,
        platform: ChatPlatform,
        chat_id: str,
        *,
        thread: Mapping[str, str] | None = None,
        every: float = 4.0,
        limit: float = 300.0,
    ) -> None:
        self._platform = platform
        self._chat_id = chat_id
        self._thread = thread
        self._every = every
        self._limit = limit
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> TypingLease:
        self._task = asyncio.create_task(self._keep_typing(), name=f"typing:{self._chat_id}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def active(self) -> bool:
        return self._task is not None and not self._task.done()

    async def expired(self) -> None:
        """Wait until the indicator stopped, by release or by the hard limit."""
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._task)

    def release(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _keep_typing(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._limit
        while (left := deadline - loop.time()) > 0:
            pause = self._every
            try:
                await self._platform.send_typing(self._chat_id, thread=self._thread)
            except PlatformRateLimited as exc:
                pause = max(pause, exc.retry_after)
            except PlatformError as exc:
                log.debug("typing indicator failed in %s: %s", self._chat_id, exc)
            except Exception:  # best effort: an adapter bug must not end the turn
                log.exception("typing indicator crashed in %s", self._chat_id)
            await asyncio.sleep(min(pause, left))

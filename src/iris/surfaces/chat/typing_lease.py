"""The typing indicator of one turn, as a lease: on while the turn holds it, off when released.

Platforms expire the indicator after a few seconds (Telegram ~5 s) and clear it on any bot
message, so the lease re-sends it every ``every`` seconds. It has one cancellation point
(``release``, also on leaving the ``async with``) and a hard ``limit``, so a stuck turn cannot
leave "typing…" on for ever. Its task lives in a task group the ``async with`` owns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from types import TracebackType

from iris.observability import metrics
from iris.surfaces.chat.platforms.base import ChatPlatform, PlatformError, PlatformRateLimited
from iris.tasks import OpenGroup

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
        self._released = asyncio.Event()
        self._stopped = asyncio.Event()
        self._tasks = OpenGroup()
        self._held = False
        self._paused = False

    async def __aenter__(self) -> TypingLease:
        await self._tasks.open()
        self._tasks.create_task(self._keep_typing(), name=f"typing:{self._chat_id}")
        self._held = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
        await self._tasks.close(exc_type, exc, tb)

    @property
    def active(self) -> bool:
        return self._held and not self._stopped.is_set()

    async def expired(self) -> None:
        """Wait until the indicator stopped, by release or by the hard limit."""
        await self._stopped.wait()

    def pause(self, paused: bool) -> None:
        """Stop showing the indicator for now (True), or show it again: a turn waiting for a
        person's approval is not typing. The platform lets the last one lapse."""
        self._paused = paused

    def release(self) -> None:
        # Not a cancellation: a typing request in flight finishes (httpx pools leak a connection
        # per request cancelled mid-flight); the sleep between requests is the one stop point.
        self._released.set()

    async def _keep_typing(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._limit
        try:
            while not self._released.is_set() and (left := deadline - loop.time()) > 0:
                pause = self._every
                try:
                    if not self._paused:
                        await self._platform.send_typing(self._chat_id, thread=self._thread)
                except PlatformRateLimited as exc:
                    metrics.chat_rate_limited(self._platform.name, exc.scope)
                    pause = max(pause, exc.retry_after)
                except PlatformError as exc:
                    log.debug("typing indicator failed in %s: %s", self._chat_id, exc)
                except Exception:  # best effort: an adapter bug must not end the turn
                    log.exception("typing indicator crashed in %s", self._chat_id)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(pause, left)):
                        await self._released.wait()
        finally:
            self._stopped.set()

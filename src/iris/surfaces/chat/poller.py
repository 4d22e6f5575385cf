"""One receiver per bot across processes: a platform receives only where its poller lease is.

Telegram allows one ``getUpdates`` poller per bot token (a second one gets 409 Conflict), and a
second Discord gateway session or Slack socket would hand the same message to two processes.
With a shared store, each process runs a ``BotPoller`` per platform: it takes the lease
``poller:{platform}:{sha256(token)[:16]}`` and connects the platform while it holds it; the
other processes stand by (one log line) and try again every second (or third of the lease, if
shorter), so when the holder dies (kill -9) another one receives within ``store.lease`` seconds,
and at once when it stops cleanly (it gives the lease up).

A holder that loses its lease (Redis away for most of the lease, or a partition: another
process may already receive) stops receiving at once: the replies it is writing on that
platform are interrupted (their text so far stays) and the platform is disconnected. It then
stands by like the others. Stopping the server disconnects first, then gives the lease up, so
a standby takes over without waiting for the lease to run out.

Connecting and disconnecting both run in the poller's own task (adapters open and close their
receive loop's task group in one task).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable

from iris.config import Config
from iris.errors import StoreUnavailable
from iris.state.lease import Lease, holder_process
from iris.state.redis_store import ERRORS, RedisStore
from iris.tasks import stop_if_cancelled

log = logging.getLogger(__name__)

# A standby's attempt to take the lease: one SET NX, cheap enough to try every second.
_RETRY = 1.0


def bot_token(config: Config, platform: str) -> str:
    """The token that identifies ``platform``'s bot (Slack: the bot token, not the app's;
    Matrix: the bot's user id, whose token may be one a login got)."""
    section = getattr(config.platforms, platform)
    resolved = getattr(section, "resolved_token", None)  # Home Assistant: token or token_env
    token = resolved() if callable(resolved) else getattr(section, "token", "")
    named = getattr(section, "bot_token", None) or token
    return str(named or getattr(section, "user_id", ""))


def poller_key(store: RedisStore, platform: str, token: str) -> str:
    # Hashed: the key names the bot without putting its secret into Redis.
    return store.key("poller", platform, hashlib.sha256(token.encode()).hexdigest()[:16])


class BotPoller:
    """Receives for one platform's bot while this process holds the bot's lease."""

    def __init__(
        self,
        store: RedisStore,
        name: str,
        token: str,
        ttl: float,
        *,
        connect: Callable[[], Awaitable[bool]],
        disconnect: Callable[[bool], Awaitable[None]],
    ) -> None:
        """``connect`` starts receiving (False: it cannot, for good, e.g. a refused token);
        ``disconnect(lost)`` stops, ``lost`` when the lease went to another process."""
        self.name = name
        self.lease = Lease(store, poller_key(store, name, token), ttl)
        self._connect = connect
        self._disconnect = disconnect
        self._wake = asyncio.Event()
        self._stopping = False
        self._lost = False
        # Set once this process either receives or stands by: start-up waits for it.
        self.settled = asyncio.Event()

    def stop(self) -> None:
        """Ask ``run`` to disconnect, give the lease up and return."""
        self._stopping = True
        self._wake.set()

    async def run(self) -> None:
        try:
            while await self._take():
                if not await self._receive():
                    return
                if not self._lost:
                    return
                log.warning("chat platform %s: poller lease lost; stopped receiving", self.name)
        finally:
            self.settled.set()
            with contextlib.suppress(StoreUnavailable, *ERRORS):
                await self.lease.release()

    async def _take(self) -> bool:
        """Wait until this process holds the lease (True) or is stopping (False)."""
        standing_by = False
        while not self._stopping:
            self._wake.clear()
            try:
                if await self.lease.acquire():
                    return True
                holder = holder_process(await self.lease.holder())
                reason = f"{holder} receives for this bot" if holder else "the lease just changed"
            except ERRORS as exc:
                reason = f"the store does not answer ({exc})"
            stop_if_cancelled()  # a stopping server must not wait on a cancellation lost there
            if not standing_by:
                log.warning("chat platform %s: standing by: %s", self.name, reason)
                standing_by = True
            self.settled.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(self.lease.ttl / 3, _RETRY)):
                    await self._wake.wait()
        return False

    async def _receive(self) -> bool:
        """Connect and receive while the lease holds (renewed from before connecting: a slow
        connect must not outlive it); False when the platform cannot connect at all."""
        self._lost = False
        self._wake.clear()

        def lost() -> None:
            self._lost = True
            self._wake.set()

        async with asyncio.TaskGroup() as group:
            keeper = group.create_task(self.lease.keep(lost), name=f"poller-lease:{self.name}")
            try:
                if not await self._connect():
                    return False
                self.settled.set()
                if not self._stopping:
                    await self._wake.wait()
                self._lost = self._lost and not self._stopping
                await self._disconnect(self._lost)
            finally:
                keeper.cancel()
        return True

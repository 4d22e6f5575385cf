"""Who runs each chat's turn when several processes share a Redis store (``store.url``): the
registry of running turns and the processes' inboxes.

One running turn per chat across every process: the room that starts a turn first takes the
chat's turn lease (``iris{chat:<chat_id>}:turn``, a ``Lease`` renewed while the turn runs, in
the chat's cluster slot: the frame log's script reads it as its fence) and is written into the
registry of running turns (the hash ``iris:turns``: chat → lease token). The registry spans
chats, so in a Redis Cluster it is in another slot than the lease: the entry is written first
(``HSETNX``), the lease taken after, so a lease never exists without an entry naming its chat;
an entry whose claim failed is dropped again, and a crash between the two leaves an entry the
reaper clears. Another process that finds the lease held answers as a busy room does
(``turn_active``).

Control that needs the running turn (``turn.cancel``, ``/stop``) and lands on another process
goes to the owner's inbox (the stream ``iris:proc:{process_id}:inbox``, found from the lease's
holder), read by one blocking reader per process (``listen``). It names the lease token it
was sent for, so a stop never cancels a later turn.

An owner that dies (kill -9) stops renewing: its lease expires within ``store.lease`` seconds.
Every process runs a reaper (``reap``, every ``store.lease / 2`` s) over the registry; a chat
whose lease is gone is handed to ``recover``, which takes the lease first (so exactly one
survivor closes the turn) and closes it in the log, as after a crash.

Claiming, releasing and the holder lookups use the ``sync`` client: a room decides "busy" and
starts a turn in one step of the loop, as it reads the frame log. Every Redis failure is
``StoreUnavailable``.

A process alone (no shared store) has nothing to share: its rooms run every turn of their chats
and ``turn_owners_for`` gives None (the socket surface's rooms then own their turns outright).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from iris.errors import StoreUnavailable
from iris.state.lease import Lease, holder_process
from iris.state.redis_store import (
    DELETE_IF_HELD,
    ERRORS,
    RedisStore,
    Retry,
    translated,
)
from iris.tasks import stop_if_cancelled

log = logging.getLogger(__name__)

INBOX_BLOCK_MS = 10_000  # an idle reader wakes this often (and sees its cancellation)
INBOX_MAXLEN = 256  # requests kept per inbox: each is acted on within a round trip
INBOX_TTL_S = 3600  # the inbox of a process that died goes away on its own
RETRY_MAX = 5.0  # seconds between two tries while Redis is away

_FORGET = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""


class TurnOwners:
    """This process's side of turn ownership: claim, release, find and ask the owner."""

    def __init__(self, store: RedisStore, ttl: float) -> None:
        self.store = store
        self.ttl = ttl
        self.registry = store.key("turns")
        self.inbox = self.inbox_of(store.process_id)
        # Give the lease up, only if still this token's (KEYS[1] the lease, ARGV[1] the token).
        self._release = store.sync.register_script(DELETE_IF_HELD)
        self._forget_now = store.sync.register_script(_FORGET)
        self._forget = store.aio.register_script(_FORGET)

    def lease_key(self, chat_id: str) -> str:
        return self.store.chat_key(chat_id, "turn")

    def inbox_of(self, process_id: str) -> str:
        return self.store.key("proc", process_id, "inbox")

    def claim(self, chat_id: str) -> Lease | None:
        """The chat's turn lease, now held by this process; None if another holder has it."""
        lease = Lease(self.store, self.lease_key(chat_id), self.ttl)
        ms = max(1, int(self.ttl * 1000))
        sync = self.store.sync
        with translated(self.store.url, "cannot take the turn"):
            # An entry already there (a live holder's, or a dead one's the reaper has not
            # reached) names this chat too: it is made ours only once the lease is.
            listed = bool(sync.hsetnx(self.registry, chat_id, lease.token))
            if sync.set(lease.key, lease.token, nx=True, px=ms):
                if not listed:
                    sync.hset(self.registry, chat_id, lease.token)
                return lease
            if listed:
                self._forget_now(keys=[self.registry], args=[chat_id, lease.token])
        return None

    def release(self, chat_id: str, lease: Lease, *, done: bool = True) -> None:
        """Give the lease up (a lease another holder took since is left alone). Unless the
        turn is ``done`` (closed in the log), its registry entry stays for the reaper."""
        with translated(self.store.url, "cannot release the turn"):
            if done:
                self._forget_now(keys=[self.registry], args=[chat_id, lease.token])
            self._release(keys=[lease.key], args=[lease.token])

    def holder(self, chat_id: str) -> str | None:
        """The token of the lease holding the chat's turn now, or None."""
        with translated(self.store.url):
            value = self.store.sync.get(self.lease_key(chat_id))
        return value if isinstance(value, str) else None

    def ask_cancel(self, chat_id: str, token: str) -> None:
        """Ask the process holding ``token`` to interrupt the chat's turn (if still that one)."""
        process = holder_process(token)
        assert process is not None
        inbox = self.inbox_of(process)
        with translated(self.store.url, "cannot reach the turn's owner"):
            pipe = self.store.sync.pipeline(transaction=False)
            pipe.xadd(
                inbox,
                {"op": "cancel", "chat": chat_id, "token": token},
                maxlen=INBOX_MAXLEN,
                approximate=True,
            )
            pipe.expire(inbox, INBOX_TTL_S)
            pipe.execute()

    async def orphans(self) -> dict[str, str]:
        """Running turns (chat → token) whose lease is gone: their owner stopped renewing."""
        with translated(self.store.url):
            entries: dict[Any, Any] = await self.store.aio.hgetall(self.registry)
            registry = {str(chat): str(token) for chat, token in entries.items()}
            chats = list(registry)
            holders: list[Any] = []
            if chats:  # one key at a time: the leases live in their chats' slots
                async with self.store.aio.pipeline(transaction=False) as pipe:
                    for chat in chats:
                        pipe.get(self.lease_key(chat))
                    holders = await pipe.execute()
        return orphaned(registry, dict(zip(chats, holders, strict=True)))

    async def forget(self, chat_id: str, token: str) -> None:
        """Drop a registry entry still naming ``token`` (its turn was dealt with)."""
        with translated(self.store.url):
            await self._forget(keys=[self.registry], args=[chat_id, token])

    async def listen(self, cancel: Callable[[str, str], None]) -> None:
        """Read this process's inbox until cancelled: ``cancel(chat_id, token)`` per request."""
        last = "0-0"  # the inbox is this process's alone: all of it is for us
        retry = Retry("the turn inbox", most=RETRY_MAX)
        while True:
            stop_if_cancelled()
            try:
                reply: Any = await self.store.blocking_for(self.inbox).xread(
                    {self.inbox: last}, count=100, block=INBOX_BLOCK_MS
                )
            except (*ERRORS, StoreUnavailable) as exc:
                if self.store.mode == "cluster":
                    await self.store.slot_map_stale()
                await retry.failed(exc)
                continue
            retry.succeeded()
            for _stream, entries in reply or []:
                for entry_id, fields in entries:
                    last = str(entry_id)
                    request = {str(k): str(v) for k, v in dict(fields).items()}
                    if request.get("op") == "cancel":
                        cancel(request.get("chat", ""), request.get("token", ""))

    async def reap(self, recover: Callable[[str], None]) -> None:
        """Every ``ttl / 2`` s, hand each chat whose owner stopped renewing to ``recover``."""
        failing = False
        while True:
            stop_if_cancelled()
            await asyncio.sleep(self.ttl / 2)
            try:
                for chat_id, token in (await self.orphans()).items():
                    recover(chat_id)  # takes the lease first: one survivor closes the turn
                    await self.forget(chat_id, token)
            except StoreUnavailable as exc:  # tried again next round: the entry stays
                if not failing:
                    log.warning("turn reaper: %s", exc.message)
                failing = True
                continue
            except Exception:
                log.exception("turn reaper failed")
                continue
            failing = False


def turn_owners_for(shared: RedisStore | None, ttl: float) -> TurnOwners | None:
    """With a shared store, who owns each chat's turn across processes; alone, None."""
    return None if shared is None else TurnOwners(shared, ttl)


def orphaned(registry: Mapping[str, str], holders: Mapping[str, str | None]) -> dict[str, str]:
    """The registry's entries (chat → token) whose chat no lease holds any more."""
    return {chat: token for chat, token in registry.items() if holders.get(chat) is None}

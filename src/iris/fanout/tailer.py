"""The per-process tailer: frames other processes append to a shared log, to the devices here.

One task per process runs ``XREAD BLOCK`` over the logs of the chats a device here follows
(``Hub.followed``), each from the seq last delivered here, and hands what it reads to
``Hub.deliver`` — in seq order, and never twice (the hub skips a seq it already delivered, e.g.
one ``publish`` returned). No pub/sub: a slow process catches up from the stream, it cannot
lose a frame.

A chat joins when its first device subscribes here and leaves with its last. A join must not
wait for a blocked read to time out: ``Hub.on_follow`` makes the tailer ``XADD`` to its own wake
stream (``proc:<process_id>:wake``), which every read includes.

Redis lost: the tailer logs once, retries with backoff, and when Redis returns reads on from
the positions it had; the devices catch up with no gap.

In a Redis Cluster one ``XREAD`` may name only keys of one hash slot (even two slots on one
node answer ``CROSSSLOT``), so the followed chats are grouped by the slot of their keys (the
tag ``{chat:<id>}``) and each group has its own blocking read, on a client to the primary that
owns the slot (one client per primary, as the slot map says: grouped by slot owner); chats
whose tags share a slot share a read. A group's wake stream is in its slot too
(``<prefix>{chat:<first chat>}:wake:<process_id>``). A failover or a resharding moves whole
slots: a read that fails (``MOVED``, a closed connection, the old primary's ``UNBLOCKED``)
asks the cluster for its slot map again and is retried at the slot's owner now (regrouped),
from the positions it had, so the same order and no-gap guarantees hold per chat. A group
ends when its last chat is no longer followed here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import cast

from redis.crc import key_slot

from iris.errors import StoreUnavailable
from iris.fanout.hub import Hub
from iris.fanout.redis_log import Entry, RedisFrameLog
from iris.state.redis_store import RedisStore, Retry, translated
from iris.tasks import Supervisor, stop_if_cancelled

log = logging.getLogger(__name__)

BLOCK = 5.0  # seconds one read waits for a frame (a join wakes it sooner)
PAGE = 512  # entries per stream per read
RETRY_FIRST = 0.1  # seconds before the first retry when Redis is lost; doubles up to ...
RETRY_MAX = 2.0
WAKE_TTL = 24 * 3600  # seconds a dead process's wake stream stays


class Tailer:
    """Feeds ``hub`` the frames of its followed chats that other processes append to ``log``."""

    def __init__(self, store: RedisStore, log: RedisFrameLog, hub: Hub) -> None:
        self.store = store
        self.log = log
        self.hub = hub
        self.wake_key = store.key("proc", store.process_id, "wake")
        self._wake_id = "0-0"  # the last wake entry read
        self.per_slot = store.mode == "cluster"
        # Cluster: slot -> its group's read; ``_changed`` wakes the loop that starts them.
        self._groups: dict[int, _SlotGroup] = {}
        self._reads = Supervisor()  # the groups' reads, ended with the tailer's run
        self._slots: dict[str, int] = {}
        self._changed = asyncio.Event()
        hub.on_follow = self._follow

    def slot(self, chat_id: str) -> int:
        """The cluster slot of the chat's keys."""
        found = self._slots.get(chat_id)
        if found is None:
            found = self._slots[chat_id] = key_slot(self.log.key(chat_id, "log").encode())
        return found

    def _follow(self, chat_id: str) -> None:
        """A chat joined: wake the read that is blocked without it (one loopback round trip,
        on the first device of a chat here only)."""
        wake_key = self.wake_key
        if self.per_slot:
            self._changed.set()  # a slot with no read yet gets one
            group = self._groups.get(self.slot(chat_id))
            if group is None:
                return
            wake_key = group.wake_key
        try:
            with translated(self.store.url):
                pipe = self.store.sync.pipeline(transaction=False)
                pipe.xadd(wake_key, {"w": "1"}, maxlen=1)
                pipe.expire(wake_key, WAKE_TTL)
                pipe.execute()
        except StoreUnavailable:
            pass  # the read fails too, and builds its list of chats afresh when it retries

    async def run(self) -> None:
        """Tail until cancelled."""
        if self.per_slot:
            await self._run_per_slot()
            return
        retry = Retry("the frame tailer", first=RETRY_FIRST, most=RETRY_MAX)
        while True:
            stop_if_cancelled()
            try:
                self._deliver(await self._read())
            except StoreUnavailable as exc:
                await retry.failed(exc.message)
                continue
            retry.succeeded()

    async def _run_per_slot(self) -> None:
        """Keep one read per slot of the followed chats, until cancelled."""
        try:
            while True:
                stop_if_cancelled()
                self._changed.clear()
                for chat_id in self.hub.followed():
                    slot = self.slot(chat_id)
                    if slot not in self._groups:
                        group = _SlotGroup(self, slot, chat_id)
                        self._groups[slot] = group
                        self._reads.create_task(group.run(), name=f"iris-tailer-{slot}")
                await self._changed.wait()
        finally:
            self._groups.clear()
            await self._reads.close()

    def _ended(self, group: _SlotGroup) -> None:
        if self._groups.get(group.slot) is group:
            del self._groups[group.slot]
        self._changed.set()  # a chat of the slot may have joined as it ended

    async def _read(self) -> list[tuple[str, list[Entry]]]:
        """One blocking read of every followed chat's log (and the wake stream)."""
        streams: dict[str, str] = {self.wake_key: self._wake_id}
        for chat_id, seq in self.hub.followed().items():
            streams[self.log.key(chat_id, "log")] = f"{seq}-0"
        with translated(self.store.url, "the frame tailer failed"):
            reply = await self.store.blocking.xread(  # pyright: ignore[reportUnknownMemberType]
                streams,  # pyright: ignore[reportArgumentType]
                count=PAGE,
                block=int(BLOCK * 1000),
            )
        return cast("list[tuple[str, list[Entry]]]", reply or [])

    def _deliver(self, reply: list[tuple[str, list[Entry]]]) -> None:
        for key, entries in reply:
            if key == self.wake_key:
                self._wake_id = entries[-1][0]
                continue
            chat_id = self.log.chat_of(key)
            # Past what is delivered here already (this process's own appends are).
            for frame in self.log.frames(chat_id, entries, self.hub.latest(chat_id)):
                self.hub.deliver(chat_id, frame)


class _SlotGroup:
    """The read of the followed chats in one cluster slot (``Tailer`` in cluster mode)."""

    def __init__(self, tailer: Tailer, slot: int, first_chat: str) -> None:
        self.tailer = tailer
        self.slot = slot
        # Named after the chat that opened the group: its tag puts the key in this slot.
        self.wake_key = tailer.log.key(first_chat, f"wake:{tailer.store.process_id}")
        self.wake_id = "0-0"

    async def run(self) -> None:
        tailer = self.tailer
        retry = Retry(f"the frame tailer (slot {self.slot})", first=RETRY_FIRST, most=RETRY_MAX)
        try:
            while True:
                stop_if_cancelled()
                streams: dict[str, str] = {self.wake_key: self.wake_id}
                for chat_id, seq in tailer.hub.followed().items():
                    if tailer.slot(chat_id) == self.slot:
                        streams[tailer.log.key(chat_id, "log")] = f"{seq}-0"
                if len(streams) == 1:
                    return  # no chat of this slot is followed here any more
                try:
                    with translated(tailer.store.url, "the frame tailer failed"):
                        client = tailer.store.slot_reader(self.wake_key)
                        reply = await client.xread(  # pyright: ignore[reportUnknownMemberType]
                            streams,  # pyright: ignore[reportArgumentType]
                            count=PAGE,
                            block=int(BLOCK * 1000),
                        )
                except StoreUnavailable as exc:
                    await tailer.store.slot_map_stale()
                    await retry.failed(exc.message)
                    continue
                retry.succeeded()
                for key, entries in cast("list[tuple[str, list[Entry]]]", reply or []):
                    if key == self.wake_key:
                        self.wake_id = entries[-1][0]
                        continue
                    chat_id = tailer.log.chat_of(key)
                    for frame in tailer.log.frames(chat_id, entries):
                        tailer.hub.deliver(chat_id, frame)
        finally:
            tailer._ended(self)  # pyright: ignore[reportPrivateUsage]

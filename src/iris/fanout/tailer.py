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
"""

from __future__ import annotations

import logging
from typing import cast

from iris.errors import StoreUnavailable
from iris.fanout.hub import Hub
from iris.fanout.redislog import Entry, RedisFrameLog
from iris.redis.connection import RedisStore, Retry, stop_if_cancelled, translated

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
        hub.on_follow = self._follow

    def _follow(self, chat_id: str) -> None:
        """A chat joined: wake the read that is blocked without it (one loopback round trip,
        on the first device of a chat here only)."""
        try:
            with translated(self.store.url):
                pipe = self.store.sync.pipeline(transaction=False)
                pipe.xadd(self.wake_key, {"w": "1"}, maxlen=1)
                pipe.expire(self.wake_key, WAKE_TTL)
                pipe.execute()
        except StoreUnavailable:
            pass  # the read fails too, and builds its list of chats afresh when it retries

    async def run(self) -> None:
        """Tail until cancelled."""
        retry = Retry("the frame tailer", first=RETRY_FIRST, most=RETRY_MAX)
        while True:
            stop_if_cancelled()
            try:
                self._deliver(await self._read())
            except StoreUnavailable as exc:
                await retry.failed(exc.message)
                continue
            retry.succeeded()

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

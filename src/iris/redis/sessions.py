"""Conversation history per session key in the shared store: ``SessionStore``'s twin in Redis.

The same semantics as the SQLite store (``iris.agent.sessions``), so any process reads what
another wrote:

Each session's keys share the hash tag ``{session:<key>}`` (one cluster slot: the scripts and
the ``MULTI`` below name them together); the two indexes span sessions and are written on
their own, after the session's keys.

- ``{session:<key>}:messages`` a list of JSON messages; a message's position is its index + 1
  (``RPUSH`` numbers a batch atomically; nothing but ``reset`` ever removes one);
- ``{session:<key>}:cuts`` a list of the cuts, ``{pos, summary, created}``, newest last;
- ``{session:<key>}:first`` the session's first user message (for a list of chats);
- ``sessions:names`` (lexical, score 0) and ``sessions:updated`` (score: the newest write) index
  the sessions for ``summaries``.

A read that needs a cut and the messages after it is one Lua script, and an append one
``MULTI``, so a reader never sees half of a write.
"""

from __future__ import annotations

import json
import time
from typing import Any, cast

from iris.agent.sessions import SessionSummary, Transcript, assembled, prefix_end
from iris.redis.connection import RedisStore, translated

# The latest cut and the newest ``limit`` messages after it, read together.
_TRANSCRIPT = """
local cut = redis.call('LINDEX', KEYS[2], -1)
local start, summary = 0, ''
if cut then
  local decoded = cjson.decode(cut)
  start, summary = tonumber(decoded.pos), decoded.summary
end
local first = math.max(start, redis.call('LLEN', KEYS[1]) - tonumber(ARGV[1]))
return {start, summary, first, redis.call('LRANGE', KEYS[1], first, -1)}
"""
# A cut after position ARGV[1], or (empty) after the newest message at this moment.
_CUT = """
local pos = tonumber(ARGV[1]) or redis.call('LLEN', KEYS[1])
redis.call('RPUSH', KEYS[2],
  cjson.encode({pos = pos, summary = ARGV[2], created = tonumber(ARGV[3])}))
"""


class RedisSessionStore:
    def __init__(self, store: RedisStore) -> None:
        self._store = store
        self._transcript = store.aio.register_script(_TRANSCRIPT)
        self._cut = store.aio.register_script(_CUT)

    def _keys(self, session: str) -> tuple[str, str, str]:
        key = self._store.tagged_key
        tag = f"session:{session}"
        return (key(tag, "messages"), key(tag, "cuts"), key(tag, "first"))

    async def history(self, session: str, limit: int = 200) -> list[dict[str, Any]]:
        return (await self.transcript(session, limit)).messages

    async def transcript(self, session: str, limit: int = 200) -> Transcript:
        """The last ``limit`` messages after the session's latest cut, headed by its summary."""
        messages, cuts, _ = self._keys(session)
        with translated(self._store.url):
            reply = await self._transcript(keys=[messages, cuts], args=[limit])
        start, summary, first, rows = cast(list[Any], reply)
        pairs = [(int(first) + i + 1, json.loads(row)) for i, row in enumerate(rows)]
        return assembled(int(start), str(summary), pairs)

    async def cut(self, session: str, summary: str = "", after: int | None = None) -> None:
        """Start the history the model sees after position ``after`` (None: after the newest
        message), headed by ``summary`` when it is not empty."""
        messages, cuts, _ = self._keys(session)
        position = "" if after is None else str(int(after))
        with translated(self._store.url):
            await self._cut(keys=[messages, cuts], args=[position, summary, time.time()])

    async def last(self, session: str) -> dict[str, Any] | None:
        """The newest message of ``session`` (None when it has none)."""
        messages, _, _ = self._keys(session)
        with translated(self._store.url):
            row = await self._store.aio.lindex(messages, -1)
        return None if row is None else json.loads(cast(str, row))

    async def append(self, session: str, messages: list[dict[str, Any]]) -> None:
        if not messages:
            return
        key, _, first = self._keys(session)
        user = next((m for m in messages if m.get("role") == "user"), None)
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.rpush(key, *(json.dumps(m) for m in messages))
                if user is not None:
                    pipe.set(first, json.dumps(user), nx=True)  # only the session's first
                await pipe.execute()
            async with self._store.aio.pipeline(transaction=False) as pipe:
                pipe.zadd(self._store.key("sessions", "updated"), {session: time.time()})
                pipe.zadd(self._store.key("sessions", "names"), {session: 0})
                await pipe.execute()

    async def reset(self, session: str) -> None:
        with translated(self._store.url):
            await self._store.aio.delete(*self._keys(session))
            async with self._store.aio.pipeline(transaction=False) as pipe:
                pipe.zrem(self._store.key("sessions", "updated"), session)
                pipe.zrem(self._store.key("sessions", "names"), session)
                await pipe.execute()

    async def summaries(self, prefix: str, limit: int) -> list[SessionSummary]:
        """The sessions whose key starts with ``prefix``, most recently written first, each
        with its first user message (the messages before a cut count: it is the same chat)."""
        names_key = self._store.key("sessions", "names")
        with translated(self._store.url):
            names = cast(
                list[str],
                await self._store.aio.zrangebylex(
                    names_key, f"[{prefix}", f"({prefix_end(prefix)}"
                ),
            )
            if not names:
                return []
            async with self._store.aio.pipeline(transaction=False) as pipe:
                pipe.zmscore(self._store.key("sessions", "updated"), names)
                for name in names:  # one key at a time: each in its session's slot
                    pipe.get(self._keys(name)[2])
                replies = await pipe.execute()
            updated = cast(list[float | None], replies[0])
            firsts = cast(list[str | None], replies[1:])
        found = [
            SessionSummary(name, None if first is None else json.loads(first), float(stamp or 0))
            for name, stamp, first in zip(names, updated, firsts, strict=True)
        ]
        found.sort(key=lambda summary: summary.updated, reverse=True)
        return found[:limit]

"""Conversation history per session key (a chat, a device chat, a CLI session).

``Sessions`` is what every history offers: ``SqliteSessions`` in the SQLite file,
``RedisSessions`` in the shared store (``store.url``), ``MemorySessions`` the REPL's history in
its own memory; ``sessions_for`` picks SQLite or Redis as ``Runtime.create`` picks every store.

Every method runs on the store's thread (``await``): a locked or lost database raises
``StoreUnavailable`` and never blocks the event loop.

Messages are never deleted by a conversation going on: a *cut* (``/new``, a compaction) says
where the history the model sees starts, and may carry the summary of what lies before it,
which then heads that history as a system message. The older messages stay in the store.

**In Redis** (``RedisSessions``): the same semantics as SQLite, so any process reads what
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
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from iris.state.redis_store import RedisStore, translated
from iris.state.sqlite import Store, transaction

_DDL = """
CREATE TABLE IF NOT EXISTS session_messages (
    session TEXT NOT NULL,
    pos INTEGER NOT NULL,
    message TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (session, pos)
);
CREATE TABLE IF NOT EXISTS session_cuts (
    session TEXT NOT NULL,
    pos INTEGER NOT NULL,
    summary TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS session_cuts_by_session ON session_cuts (session);
"""


@dataclass
class Transcript:
    """The history after the last cut: the cut's summary (its text; the agent words the
    message the model sees, ``agent.context.history``) and the messages kept after it, with
    where each sits in the store."""

    messages: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    positions: list[int] = field(default_factory=list[int])
    start: int = 0  # the cut it starts after
    summary: str = ""  # the cut's summary of what came before it (empty: none)

    def cut_after(self, replaced: int) -> int:
        """The store position that ends the first ``replaced`` messages of the history the
        model saw (the summary's message first, when there is a summary)."""
        kept = self.positions[: replaced - 1] if self.summary else self.positions[:replaced]
        return max([self.start, *kept]) if replaced > 0 else self.start


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One session as a list of conversations shows it."""

    session: str
    first_user: dict[str, Any] | None  # its first user message
    updated: float  # when its newest message was written (Unix seconds)


class Sessions(Protocol):
    """Conversation history per session key: ``SqliteSessions`` (SQLite) or, when processes
    share a store, ``iris.state.sessions.RedisSessions``."""

    async def history(self, session: str, limit: int = 200) -> list[dict[str, Any]]: ...

    async def transcript(self, session: str, limit: int = 200) -> Transcript: ...

    async def cut(self, session: str, summary: str = "", after: int | None = None) -> None: ...

    async def last(self, session: str) -> dict[str, Any] | None: ...

    async def append(self, session: str, messages: list[dict[str, Any]]) -> None: ...

    async def reset(self, session: str) -> None: ...

    async def summaries(self, prefix: str, limit: int) -> list[SessionSummary]: ...


def assembled(start: int, summary: str, pairs: list[tuple[int, dict[str, Any]]]) -> Transcript:
    """The transcript after the cut at ``start`` (headed by its ``summary`` when not empty)
    from the stored ``(position, message)`` pairs after it, oldest first."""
    # Never start a history in the middle of a tool exchange.
    while pairs and pairs[0][1].get("role") == "tool":
        pairs = pairs[1:]
    transcript = Transcript(start=start, summary=summary)
    transcript.messages += [message for _, message in pairs]
    transcript.positions += [pos for pos, _ in pairs]
    return transcript


def prefix_end(prefix: str) -> str:
    """The first key after every key that starts with ``prefix`` (a key range's end)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class SqliteSessions:
    def __init__(self, store: Store) -> None:
        self._store = store
        store.ensure_schema(_DDL)

    async def history(self, session: str, limit: int = 200) -> list[dict[str, Any]]:
        return (await self.transcript(session, limit)).messages

    async def transcript(self, session: str, limit: int = 200) -> Transcript:
        """The last ``limit`` messages after the session's latest cut, headed by its summary."""

        def read(conn: sqlite3.Connection) -> tuple[sqlite3.Row | None, list[sqlite3.Row]]:
            cut = conn.execute(
                "SELECT pos, summary FROM session_cuts WHERE session=? ORDER BY rowid DESC LIMIT 1",
                (session,),
            ).fetchone()
            rows = conn.execute(
                "SELECT pos, message FROM session_messages WHERE session=? AND pos>?"
                " ORDER BY pos DESC LIMIT ?",
                (session, cut["pos"] if cut is not None else 0, limit),
            ).fetchall()
            return cut, rows

        cut, rows = await self._store.run(read, write=False)
        pairs = [(int(row["pos"]), json.loads(row["message"])) for row in reversed(rows)]
        if cut is None:
            return assembled(0, "", pairs)
        return assembled(int(cut["pos"]), cut["summary"], pairs)

    async def cut(self, session: str, summary: str = "", after: int | None = None) -> None:
        """Start the history the model sees after position ``after`` (None: after the newest
        message), headed by ``summary`` when it is not empty."""
        now = time.time()

        def write(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                pos = after
                if pos is None:
                    pos = conn.execute(
                        "SELECT COALESCE(MAX(pos), 0) AS top FROM session_messages WHERE session=?",
                        (session,),
                    ).fetchone()["top"]
                conn.execute(
                    "INSERT INTO session_cuts (session, pos, summary, created) VALUES (?, ?, ?, ?)",
                    (session, int(pos or 0), summary, now),
                )

        await self._store.run(write)

    async def last(self, session: str) -> dict[str, Any] | None:
        """The newest message of ``session`` (None when it has none)."""
        row = await self._store.run(
            lambda conn: conn.execute(
                "SELECT message FROM session_messages WHERE session=? ORDER BY pos DESC LIMIT 1",
                (session,),
            ).fetchone(),
            write=False,
        )
        return None if row is None else json.loads(row["message"])

    async def append(self, session: str, messages: list[dict[str, Any]]) -> None:
        if not messages:
            return
        encoded = [json.dumps(m) for m in messages]
        now = time.time()

        def write(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                top = conn.execute(
                    "SELECT COALESCE(MAX(pos), 0) AS top FROM session_messages WHERE session=?",
                    (session,),
                ).fetchone()["top"]
                conn.executemany(
                    "INSERT INTO session_messages (session, pos, message, created)"
                    " VALUES (?, ?, ?, ?)",
                    [(session, int(top) + i + 1, m, now) for i, m in enumerate(encoded)],
                )

        await self._store.run(write)

    async def reset(self, session: str) -> None:
        def delete(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.execute("DELETE FROM session_messages WHERE session=?", (session,))
                conn.execute("DELETE FROM session_cuts WHERE session=?", (session,))

        await self._store.run(delete)

    async def summaries(self, prefix: str, limit: int) -> list[SessionSummary]:
        """The sessions whose key starts with ``prefix``, most recently written first, each
        with its first user message (the messages before a cut count: it is the same chat)."""
        # A key range, not LIKE: the primary key's index serves it, and '%' or '_' in a key
        # mean nothing.
        end = prefix_end(prefix)

        def read(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            return conn.execute(
                "SELECT session, MAX(created) AS updated, (SELECT m.message FROM session_messages"
                " AS m WHERE m.session = s.session AND json_extract(m.message, '$.role') = 'user'"
                " ORDER BY m.pos LIMIT 1) AS first FROM session_messages AS s"
                " WHERE session >= ? AND session < ? GROUP BY session ORDER BY updated DESC"
                " LIMIT ?",
                (prefix, end, limit),
            ).fetchall()

        rows = await self._store.run(read, write=False)
        return [
            SessionSummary(
                row["session"],
                None if row["first"] is None else json.loads(row["first"]),
                float(row["updated"]),
            )
            for row in rows
        ]


class MemorySessions:
    """Histories kept by this process alone, gone when it ends (``iris chat``'s session)."""

    def __init__(self) -> None:
        self._messages: dict[str, list[tuple[int, dict[str, Any], float]]] = {}
        self._cuts: dict[str, tuple[int, str]] = {}

    async def history(self, session: str, limit: int = 200) -> list[dict[str, Any]]:
        return (await self.transcript(session, limit)).messages

    async def transcript(self, session: str, limit: int = 200) -> Transcript:
        start, summary = self._cuts.get(session, (0, ""))
        after = [(pos, json.loads(json.dumps(m))) for pos, m, _ in self._stored(session)]
        return assembled(start, summary, [p for p in after if p[0] > start][-limit:])

    async def cut(self, session: str, summary: str = "", after: int | None = None) -> None:
        top = self._top(session) if after is None else after
        self._cuts[session] = (top, summary)

    async def last(self, session: str) -> dict[str, Any] | None:
        stored = self._stored(session)
        return json.loads(json.dumps(stored[-1][1])) if stored else None

    async def append(self, session: str, messages: list[dict[str, Any]]) -> None:
        top, now = self._top(session), time.time()
        # Copies, as a store's would be: the caller may go on changing its own.
        added = [(top + i + 1, json.loads(json.dumps(m)), now) for i, m in enumerate(messages)]
        self._messages.setdefault(session, []).extend(added)

    async def reset(self, session: str) -> None:
        self._messages.pop(session, None)
        self._cuts.pop(session, None)

    async def summaries(self, prefix: str, limit: int) -> list[SessionSummary]:
        found = [
            SessionSummary(
                session,
                next((m for _, m, _ in stored if m.get("role") == "user"), None),
                stored[-1][2],
            )
            for session, stored in self._messages.items()
            if session.startswith(prefix) and stored
        ]
        return sorted(found, key=lambda s: s.updated, reverse=True)[:limit]

    def _stored(self, session: str) -> list[tuple[int, dict[str, Any], float]]:
        return self._messages.get(session, [])

    def _top(self, session: str) -> int:
        stored = self._stored(session)
        return stored[-1][0] if stored else 0


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


class RedisSessions:
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


def sessions_for(store: Store, shared: RedisStore | None) -> Sessions:
    """The SQLite store, or with a shared store (``store.url``) its Redis twin."""
    return SqliteSessions(store) if shared is None else RedisSessions(shared)

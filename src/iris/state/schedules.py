"""Scheduled runs (``/remind``, ``/every``): what is due when, who runs it, each user's zone.

A ``Schedule`` is one chat's: its prompt, its rule (a cron expression, or none for a one-off),
the time zone the rule runs in and ``next_at``, the instant its next run is due. A run is the
pair (schedule, ``next_at``) and happens once:

- ``claim`` takes a due run for one process: with the SQLite store (one process) a holder and
  an expiry on the row; with a shared store (``store.url``) a lease per schedule in Redis
  (``SET NX PX``, in one script with the check that the run is still due). ``renew`` keeps it
  while the run goes on.
- ``finish`` ends it: the next run is recorded (or a one-off removed) only if the claim still
  holds, in the same step (a compare-and-set), so a run is finished once.
- a process that dies mid-run leaves its claim to expire; the next claim of that run counts
  its attempts (``attempts`` > 1: the run began before and was cut), so the scheduler can say
  so when it runs it again.

``zone``/``set_zone`` keep each user's time zone (``/tz``); a new zone moves the user's
recurring schedules to its wall clock. ``note``/``notes`` keep what a chat must be told in its
next delivery (a run that could not be delivered).

All Redis keys share the hash tag ``{schedules}``: one Cluster slot, so one script may touch
the due set, a schedule and its lease together.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast
from zoneinfo import ZoneInfo

from redis.typing import EncodableT, FieldT

from iris.formats.timespec import Cron, next_after
from iris.state.lease import Lease
from iris.state.redis_store import RedisStore, translated
from iris.state.sqlite import Store, transaction

_DDL = """
CREATE TABLE IF NOT EXISTS iris_schedules (
    id TEXT PRIMARY KEY,
    chat TEXT NOT NULL,
    user TEXT NOT NULL,
    target TEXT NOT NULL,
    text TEXT NOT NULL,
    cron TEXT NOT NULL,
    zone TEXT NOT NULL,
    next_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    holder TEXT,
    held_until REAL
);
CREATE INDEX IF NOT EXISTS iris_schedules_next ON iris_schedules (next_at);
CREATE INDEX IF NOT EXISTS iris_schedules_chat ON iris_schedules (chat);
CREATE TABLE IF NOT EXISTS iris_schedule_zones (user TEXT PRIMARY KEY, zone TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS iris_schedule_notes (
    n INTEGER PRIMARY KEY AUTOINCREMENT, chat TEXT NOT NULL, note TEXT NOT NULL
);
"""
_COLUMNS = "id, chat, user, target, text, cron, zone, next_at, attempts"


@dataclass(frozen=True, slots=True)
class Schedule:
    id: str
    chat: str  # the conversation's session key (``telegram:42``, ``iris:<chat>``)
    user: str  # who made it: ``<surface>:<user id>``
    target: Mapping[str, Any]  # where a run is delivered: {"surface": ..., "chat_id": ..., ...}
    text: str  # the prompt a run sends
    cron: str  # its rule; "" for a one-off
    zone: str  # the time zone its rule (and its answers) use
    next_at: float  # when the next run is due (epoch seconds)
    attempts: int = 0  # tries of that run that began (claimed)

    def following(self, after: float) -> float | None:
        """When the run after the one due at ``next_at`` is due (None: a one-off)."""
        if not self.cron:
            return None
        return next_after(Cron.parse(self.cron), max(after, self.next_at), ZoneInfo(self.zone))


def new_id() -> str:
    return secrets.token_hex(3)


@dataclass(frozen=True, slots=True)
class Claim:
    """A due run this process holds: ``schedule`` as claimed (its ``attempts`` counted)."""

    schedule: Schedule
    token: str
    lease: Lease | None = None  # with a shared store


class Schedules(Protocol):
    async def add(self, schedule: Schedule) -> None: ...

    async def of_chat(self, chat: str) -> list[Schedule]:
        """The chat's schedules, the soonest first."""
        ...

    async def count_user(self, user: str) -> int: ...

    async def remove(self, chat: str, schedule_id: str) -> bool:
        """Remove the chat's schedule ``schedule_id``; False if the chat has none by that id."""
        ...

    async def due(self, now: float, limit: int = 100) -> list[Schedule]:
        """Schedules whose run is due at ``now``, the earliest first."""
        ...

    async def claim(self, schedule: Schedule, ttl: float, now: float) -> Claim | None:
        """Hold the run due at ``schedule.next_at`` for ``ttl`` seconds; None if another
        process holds it or it is no longer due (run already)."""
        ...

    async def renew(self, claim: Claim, ttl: float, now: float) -> bool: ...

    async def finish(self, claim: Claim, next_at: float | None) -> bool:
        """The run is done: the next is due at ``next_at`` (None: remove the schedule). False
        if the claim was lost (another process may run it)."""
        ...

    async def zone(self, user: str) -> str | None: ...

    async def set_zone(self, user: str, zone: str, now: float) -> int:
        """Keep ``user``'s zone and move their recurring schedules to it; how many moved."""
        ...

    async def note(self, chat: str, text: str) -> None:
        """Something the chat is told in its next delivery."""
        ...

    async def notes(self, chat: str) -> list[str]:
        """The chat's notes, taken (each is told once)."""
        ...


def _row(row: tuple[Any, ...]) -> Schedule:
    id_, chat, user, target, text, cron, zone, next_at, attempts = row
    return Schedule(id_, chat, user, json.loads(target), text, cron, zone, next_at, attempts)


class SqliteSchedules:
    """Schedules in the SQLite file: one process claims (a holder and an expiry per row, so a
    run cut by a crash is claimed again after a restart)."""

    def __init__(self, store: Store, process: str = "") -> None:
        self._store = store
        self._process = process or secrets.token_hex(4)
        store.ensure_schema(_DDL)

    async def add(self, schedule: Schedule) -> None:
        s = schedule
        row = (s.id, s.chat, s.user, json.dumps(dict(s.target)), s.text, s.cron, s.zone)
        await self._store.run(
            lambda conn: conn.execute(
                f"INSERT INTO iris_schedules ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
                (*row, s.next_at, s.attempts),
            )
        )

    async def _select(self, where: str, params: tuple[Any, ...], limit: int = -1) -> list[Schedule]:
        query = f"SELECT {_COLUMNS} FROM iris_schedules WHERE {where} ORDER BY next_at, id"
        query += f" LIMIT {int(limit)}"
        rows = await self._store.run(
            lambda conn: conn.execute(query, params).fetchall(), write=False
        )
        return [_row(tuple(r)) for r in rows]

    async def of_chat(self, chat: str) -> list[Schedule]:
        return await self._select("chat=?", (chat,))

    async def count_user(self, user: str) -> int:
        query = "SELECT COUNT(*) FROM iris_schedules WHERE user=?"
        row = await self._store.run(
            lambda conn: conn.execute(query, (user,)).fetchone(), write=False
        )
        return int(row[0])

    async def remove(self, chat: str, schedule_id: str) -> bool:
        query = "DELETE FROM iris_schedules WHERE chat=? AND id=?"
        gone = await self._store.run(lambda conn: conn.execute(query, (chat, schedule_id)))
        return gone.rowcount > 0

    async def due(self, now: float, limit: int = 100) -> list[Schedule]:
        return await self._select("next_at<=?", (now,), limit)

    async def claim(self, schedule: Schedule, ttl: float, now: float) -> Claim | None:
        token = f"{self._process}/{secrets.token_hex(4)}"

        def take(conn: sqlite3.Connection) -> int | None:
            with transaction(conn):
                taken = conn.execute(
                    "UPDATE iris_schedules SET attempts=attempts+1, holder=?, held_until=? "
                    "WHERE id=? AND next_at=? AND (holder IS NULL OR held_until<?)",
                    (token, now + ttl, schedule.id, schedule.next_at, now),
                )
                if taken.rowcount != 1:
                    return None
                query = "SELECT attempts FROM iris_schedules WHERE id=?"
                return int(conn.execute(query, (schedule.id,)).fetchone()[0])

        attempts = await self._store.run(take)
        if attempts is None:
            return None
        return Claim(replace(schedule, attempts=attempts), token)

    async def renew(self, claim: Claim, ttl: float, now: float) -> bool:
        query = "UPDATE iris_schedules SET held_until=? WHERE id=? AND holder=?"
        done = await self._store.run(
            lambda conn: conn.execute(query, (now + ttl, claim.schedule.id, claim.token))
        )
        return done.rowcount == 1

    async def finish(self, claim: Claim, next_at: float | None) -> bool:
        s = claim.schedule
        if next_at is None:
            query, params = (
                "DELETE FROM iris_schedules WHERE id=? AND holder=?",
                (s.id, claim.token),
            )
        else:
            # A schedule a new zone moved while it ran keeps its new time.
            query = (
                "UPDATE iris_schedules SET holder=NULL, held_until=NULL, "
                "attempts=CASE WHEN next_at=? THEN 0 ELSE attempts END, "
                "next_at=CASE WHEN next_at=? THEN ? ELSE next_at END WHERE id=? AND holder=?"
            )
            params = (s.next_at, s.next_at, next_at, s.id, claim.token)
        done = await self._store.run(lambda conn: conn.execute(query, params))
        return done.rowcount == 1

    async def zone(self, user: str) -> str | None:
        query = "SELECT zone FROM iris_schedule_zones WHERE user=?"
        row = await self._store.run(
            lambda conn: conn.execute(query, (user,)).fetchone(), write=False
        )
        return None if row is None else str(row[0])

    async def set_zone(self, user: str, zone: str, now: float) -> int:
        moved = [_moved(s, zone, now) for s in await self._select("user=?", (user,))]

        def write(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.execute(
                    "INSERT OR REPLACE INTO iris_schedule_zones (user, zone) VALUES (?, ?)",
                    (user, zone),
                )
                for s in moved:
                    conn.execute(
                        "UPDATE iris_schedules SET zone=?, next_at=? WHERE id=?",
                        (s.zone, s.next_at, s.id),
                    )

        await self._store.run(write)
        return sum(1 for s in moved if s.cron)

    async def note(self, chat: str, text: str) -> None:
        query = "INSERT INTO iris_schedule_notes (chat, note) VALUES (?, ?)"
        await self._store.run(lambda conn: conn.execute(query, (chat, text)))

    async def notes(self, chat: str) -> list[str]:
        def take(conn: sqlite3.Connection) -> list[str]:
            with transaction(conn):
                query = "SELECT note FROM iris_schedule_notes WHERE chat=? ORDER BY n"
                found = [str(r[0]) for r in conn.execute(query, (chat,)).fetchall()]
                conn.execute("DELETE FROM iris_schedule_notes WHERE chat=?", (chat,))
                return found

        return await self._store.run(take)


def _moved(schedule: Schedule, zone: str, now: float) -> Schedule:
    """``schedule`` in ``zone``: a recurring one's next run on that zone's wall clock (a
    one-off stays at its instant)."""
    if not schedule.cron:
        return replace(schedule, zone=zone)
    following = next_after(Cron.parse(schedule.cron), now, ZoneInfo(zone))
    return replace(schedule, zone=zone, next_at=following or schedule.next_at)


# KEYS: the schedule, its lease. ARGV: the due time as stored, the token, the lease in ms.
_CLAIM = """
if redis.call('HGET', KEYS[1], 'next_at') ~= ARGV[1] then return -1 end
if not redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then return 0 end
return redis.call('HINCRBY', KEYS[1], 'attempts', 1)
"""
# KEYS: the schedule, its lease, the due set, the chat's set, the user's set.
# ARGV: the token, the due time as claimed, the next due time ("" to remove), the id.
_FINISH = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[3], ARGV[4])
  redis.call('SREM', KEYS[4], ARGV[4])
  redis.call('SREM', KEYS[5], ARGV[4])
elseif redis.call('HGET', KEYS[1], 'next_at') == ARGV[2] then
  redis.call('HSET', KEYS[1], 'next_at', ARGV[3], 'attempts', 0)
  redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
end
redis.call('DEL', KEYS[2])
return 1
"""


def _fields(s: Schedule) -> dict[FieldT, EncodableT]:
    return {
        "id": s.id,
        "chat": s.chat,
        "user": s.user,
        "target": json.dumps(dict(s.target)),
        "text": s.text,
        "cron": s.cron,
        "zone": s.zone,
        "next_at": repr(float(s.next_at)),
        "attempts": str(s.attempts),
    }


def _parsed(fields: Mapping[str, str]) -> Schedule:
    return Schedule(
        fields["id"],
        fields["chat"],
        fields["user"],
        json.loads(fields["target"]),
        fields["text"],
        fields["cron"],
        fields["zone"],
        float(fields["next_at"]),
        int(fields.get("attempts", "0")),
    )


class RedisSchedules:
    """Schedules in the Redis every process shares: a run is claimed by one lease per schedule,
    taken in the same script that checks the run is still due."""

    def __init__(self, store: RedisStore) -> None:
        self._store = store
        self._claim = store.aio.register_script(_CLAIM)
        self._finish = store.aio.register_script(_FINISH)

    def _key(self, *parts: str) -> str:
        return self._store.tagged_key("schedules", *parts)

    async def add(self, schedule: Schedule) -> None:
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.hset(self._key("s", schedule.id), mapping=_fields(schedule))
                pipe.zadd(self._key("due"), {schedule.id: schedule.next_at})
                pipe.sadd(self._key("chat", schedule.chat), schedule.id)
                pipe.sadd(self._key("user", schedule.user), schedule.id)
                await pipe.execute()

    async def _load(self, ids: list[str]) -> list[Schedule]:
        if not ids:
            return []
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=False) as pipe:
                for schedule_id in ids:
                    pipe.hgetall(self._key("s", schedule_id))
                found = cast(list[dict[str, str]], await pipe.execute())
        schedules = [_parsed(fields) for fields in found if fields]
        return sorted(schedules, key=lambda s: (s.next_at, s.id))

    async def of_chat(self, chat: str) -> list[Schedule]:
        with translated(self._store.url):
            ids = cast(set[str], await self._store.aio.smembers(self._key("chat", chat)))
        return await self._load(sorted(ids))

    async def count_user(self, user: str) -> int:
        with translated(self._store.url):
            return int(await self._store.aio.scard(self._key("user", user)))

    async def remove(self, chat: str, schedule_id: str) -> bool:
        found = [s for s in await self.of_chat(chat) if s.id == schedule_id]
        if not found:
            return False
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.delete(self._key("s", schedule_id))
                pipe.zrem(self._key("due"), schedule_id)
                pipe.srem(self._key("chat", chat), schedule_id)
                pipe.srem(self._key("user", found[0].user), schedule_id)
                await pipe.execute()
        return True

    async def due(self, now: float, limit: int = 100) -> list[Schedule]:
        with translated(self._store.url):
            ids = await self._store.aio.zrangebyscore(
                self._key("due"), "-inf", now, start=0, num=limit
            )
        return await self._load(cast(list[str], ids))

    async def claim(self, schedule: Schedule, ttl: float, now: float) -> Claim | None:
        lease = Lease(self._store, self._key("run", schedule.id), ttl)
        keys = [self._key("s", schedule.id), lease.key]
        args = [repr(float(schedule.next_at)), lease.token, max(1, int(ttl * 1000))]
        with translated(self._store.url):
            attempts = int(await self._claim(keys=keys, args=args))
        if attempts <= 0:
            return None
        return Claim(replace(schedule, attempts=attempts), lease.token, lease)

    async def renew(self, claim: Claim, ttl: float, now: float) -> bool:
        assert claim.lease is not None
        with translated(self._store.url):
            return await claim.lease.renew()

    async def finish(self, claim: Claim, next_at: float | None) -> bool:
        s = claim.schedule
        assert claim.lease is not None
        keys = [
            self._key("s", s.id),
            claim.lease.key,
            self._key("due"),
            self._key("chat", s.chat),
            self._key("user", s.user),
        ]
        following = "" if next_at is None else repr(float(next_at))
        args = [claim.token, repr(float(s.next_at)), following, s.id]
        with translated(self._store.url):
            return bool(await self._finish(keys=keys, args=args))

    async def zone(self, user: str) -> str | None:
        with translated(self._store.url):
            found = await self._store.aio.hget(self._key("zones"), user)
        return found if isinstance(found, str) else None

    async def set_zone(self, user: str, zone: str, now: float) -> int:
        with translated(self._store.url):
            ids = cast(set[str], await self._store.aio.smembers(self._key("user", user)))
        moved = [_moved(s, zone, now) for s in await self._load(sorted(ids))]
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.hset(self._key("zones"), user, zone)
                for s in moved:
                    pipe.hset(self._key("s", s.id), mapping=_fields(s))
                    pipe.zadd(self._key("due"), {s.id: s.next_at})
                await pipe.execute()
        return sum(1 for s in moved if s.cron)

    async def note(self, chat: str, text: str) -> None:
        with translated(self._store.url):
            await self._store.aio.rpush(self._key("notes", chat), text)

    async def notes(self, chat: str) -> list[str]:
        key = self._key("notes", chat)
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.lrange(key, 0, -1)
                pipe.delete(key)
                found, _ = await pipe.execute()
        return [str(n) for n in cast(list[str], found)]


def schedules_for(store: Store, shared: RedisStore | None) -> Schedules:
    """The SQLite file (one process), or with a shared store (``store.url``) Redis."""
    return SqliteSchedules(store) if shared is None else RedisSchedules(shared)

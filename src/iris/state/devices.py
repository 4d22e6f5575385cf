"""Device tokens for the iris socket: made by ``iris devices add``, kept in the store as digests.

A device token is 256 random bits (``secrets.token_urlsafe(32)``), shown once when it is made.
The store keeps only its SHA-256: for a secret nobody can guess a salted, slow hash buys nothing
(there is no dictionary to slow down), and a plain digest can be found by its index. The index
lookup compares digests, not tokens; what it could leak by timing is how much of a *digest*
matched, and turning that into a token is a preimage search. The row found is still compared
with the digest in constant time.

Revoking keeps the row, marked, so a revoked device is told so (4401 ``revoked``) rather than
"unknown token", and ``iris devices add`` may reuse the name. ``last_seen`` is when the device
last authenticated, refreshed while it stays connected (at most ``TOUCH_EVERY`` stale).

The CLI calls the waiting methods (``add``, ``devices``, ``revoke``); the server the ``async``
ones, which run on the store's thread (``iris.state.sqlite``) and never block the event loop.

``Devices`` is what both stores offer: ``SqliteDevices`` in the SQLite file, ``RedisDevices``
in the shared store (``store.url``); ``devices_for`` picks one.

**In Redis** (``RedisDevices``): ``iris devices add|list|revoke`` with ``store.url`` set writes here, and every process checks
tokens here, so a device paired once connects to any of them and a revoke reaches all of them
(each within ``REVOCATION_POLL``). Only digests are kept, as in SQLite:

- ``{devices}:token:<digest>`` a hash: ``name``, ``created``, ``last_seen``, ``revoked``; a revoked
  device's hash stays, so it is told ``revoked`` rather than unknown;
- ``{devices}:name:<name>`` the digest of the paired (not revoked) device called ``name``: the
  unique name, taken and freed by the scripts that add and revoke;
- ``{devices}:paired`` the paired devices' digests, scored by when they were made.

Adding, revoking and checking are each one Lua script: the name check and the write cannot be
split by another process's ``add``. So that a script may name them together in a Redis
Cluster, every device key shares the hash tag ``{devices}`` (one slot: a deployment pairs a
handful of devices, and each is checked once per connection and poll).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import time
import unicodedata
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from iris.errors import DeviceError
from iris.state.redis_store import RedisStore, translated
from iris.state.sqlite import Store, transaction

TOKEN_BYTES = 32  # 256 bits
MAX_NAME = 64
TOUCH_EVERY = 60.0  # seconds between two last_seen writes for a device that stays connected

_DDL = """
CREATE TABLE IF NOT EXISTS iris_devices (
    digest TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created REAL NOT NULL,
    last_seen REAL,
    revoked REAL
);
CREATE UNIQUE INDEX IF NOT EXISTS iris_devices_active_name
    ON iris_devices (name) WHERE revoked IS NULL;
"""


@dataclass(frozen=True, slots=True)
class Device:
    """A paired device as ``iris devices list`` shows it (never its token)."""

    name: str
    created: float
    last_seen: float | None


@dataclass(frozen=True, slots=True)
class Check:
    """What a presented token is: a paired device's (``ok``), a revoked one's, or nobody's."""

    status: Literal["ok", "revoked", "unknown"]
    digest: str | None  # the device's token digest; None for a config token (or no token)
    name: str | None = None


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def digest(token: str) -> str:
    """The stored form of a token (hex SHA-256 of its UTF-8)."""
    return hashlib.sha256(token.encode()).hexdigest()


def clean_name(name: str) -> str:
    """A device name as stored: trimmed, 1-64 characters, no control characters."""
    value = name.strip()
    if not value or len(value) > MAX_NAME:
        raise DeviceError(f"a device name is 1-{MAX_NAME} characters")
    if any(unicodedata.category(c).startswith("C") for c in value):
        raise DeviceError("a device name cannot hold control or invisible format characters")
    return value


class Devices(Protocol):
    """Paired devices: ``SqliteDevices`` (SQLite) or ``RedisDevices``."""

    def add(self, name: str) -> str: ...

    def devices(self) -> list[Device]: ...

    def revoke(self, name: str) -> None: ...

    async def check(self, token: str) -> Check: ...

    async def revoked(self, digests: Collection[str]) -> set[str]: ...

    async def any_paired(self) -> bool: ...


def name_taken(name: str) -> DeviceError:
    return DeviceError(f"a device named {name!r} exists; revoke it first or pick another name")


def no_such_device(name: str) -> DeviceError:
    return DeviceError(f"no device named {name!r} (see `iris devices list`)")


class SqliteDevices:
    def __init__(self, store: Store, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock
        store.ensure_schema(_DDL)

    # -- the CLI: waits ------------------------------------------------------------------------
    def add(self, name: str) -> str:
        """Pair a device called ``name``; returns its token (the only time it exists in full)."""
        name = clean_name(name)
        token = new_token()
        row = (digest(token), name, self._clock())

        def insert(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                taken = conn.execute(
                    "SELECT 1 FROM iris_devices WHERE name=? AND revoked IS NULL", (name,)
                ).fetchone()
                if taken is None:
                    conn.execute(
                        "INSERT INTO iris_devices (digest, name, created) VALUES (?, ?, ?)", row
                    )
            return taken is None

        if not self._store.call(insert):
            raise name_taken(name)
        return token

    def devices(self) -> list[Device]:
        """Paired devices (not revoked), oldest first."""
        rows = self._store.call(
            lambda conn: conn.execute(
                "SELECT name, created, last_seen FROM iris_devices WHERE revoked IS NULL"
                " ORDER BY created, name"
            ).fetchall(),
            write=False,
        )
        return [Device(row["name"], row["created"], row["last_seen"]) for row in rows]

    def revoke(self, name: str) -> None:
        """Revoke the device called ``name``: its token is refused from now on."""
        now = self._clock()
        changed = self._store.call(
            lambda conn: (
                conn.execute(
                    "UPDATE iris_devices SET revoked=? WHERE name=? AND revoked IS NULL",
                    (now, name.strip()),
                ).rowcount
            )
        )
        if not changed:
            raise no_such_device(name.strip())

    # -- the server: off the event loop --------------------------------------------------------
    async def check(self, token: str) -> Check:
        """Whose token is this? A paired device's ``last_seen`` becomes now."""
        wanted = digest(token)
        now = self._clock()

        def look(conn: sqlite3.Connection) -> Check:
            row = conn.execute(
                "SELECT digest, name, revoked FROM iris_devices WHERE digest=?", (wanted,)
            ).fetchone()
            if row is None or not hmac.compare_digest(row["digest"], wanted):
                return Check("unknown", wanted)
            if row["revoked"] is not None:
                return Check("revoked", wanted, row["name"])
            conn.execute("UPDATE iris_devices SET last_seen=? WHERE digest=?", (now, wanted))
            return Check("ok", wanted, row["name"])

        return await self._store.run(look)

    async def revoked(self, digests: Collection[str]) -> set[str]:
        """Which of these (connected devices') digests are revoked or gone; the others'
        ``last_seen`` is refreshed when older than ``TOUCH_EVERY``."""
        wanted = sorted(set(digests))
        now = self._clock()

        def look(conn: sqlite3.Connection) -> set[str]:
            marks = ",".join("?" * len(wanted))
            rows = conn.execute(
                f"SELECT digest FROM iris_devices WHERE revoked IS NULL AND digest IN ({marks})",
                wanted,
            ).fetchall()
            live = [row["digest"] for row in rows]
            conn.execute(
                f"UPDATE iris_devices SET last_seen=? WHERE digest IN ({marks})"
                " AND revoked IS NULL AND (last_seen IS NULL OR last_seen < ?)",
                (now, *wanted, now - TOUCH_EVERY),
            )
            return set(wanted) - set(live)

        if not wanted:
            return set()
        return await self._store.run(look)

    async def any_paired(self) -> bool:
        row = await self._store.run(
            lambda conn: conn.execute(
                "SELECT 1 FROM iris_devices WHERE revoked IS NULL LIMIT 1"
            ).fetchone(),
            write=False,
        )
        return row is not None


# KEYS: name, device, paired; ARGV: digest, name, created.
_ADD = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX') == false then return 0 end
redis.call('HSET', KEYS[2], 'digest', ARGV[1], 'name', ARGV[2], 'created', ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
return 1
"""
# KEYS: name, paired; ARGV: now, the device key's prefix.
_REVOKE = """
local found = redis.call('GET', KEYS[1])
if not found then return 0 end
redis.call('HSET', ARGV[2] .. found, 'revoked', ARGV[1])
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], found)
return 1
"""
# KEYS: device; ARGV: now. Returns {digest, name, revoked} (false: unknown); a paired device
# is seen now.
_CHECK = """
local row = redis.call('HMGET', KEYS[1], 'digest', 'name', 'revoked')
if not row[1] then return false end
if not row[3] then redis.call('HSET', KEYS[1], 'last_seen', ARGV[1]) end
return {row[1], row[2], row[3] or ''}
"""
# KEYS: devices; ARGV: now, stale-before. Returns the indexes (1-based) of the revoked or gone;
# the others are seen now when last seen before ``stale-before``.
_REVOKED = """
local gone = {}
for i, key in ipairs(KEYS) do
  local row = redis.call('HMGET', key, 'digest', 'revoked', 'last_seen')
  if not row[1] or row[2] then
    table.insert(gone, i)
  elseif not row[3] or tonumber(row[3]) < tonumber(ARGV[2]) then
    redis.call('HSET', key, 'last_seen', ARGV[1])
  end
end
return gone
"""


class RedisDevices:
    def __init__(self, store: RedisStore, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock
        self._paired = store.tagged_key("devices", "paired")
        self._add = store.sync.register_script(_ADD)
        self._revoke = store.sync.register_script(_REVOKE)
        self._check = store.aio.register_script(_CHECK)
        self._revoked = store.aio.register_script(_REVOKED)

    def _device(self, wanted: str) -> str:
        return self._store.tagged_key("devices", "token", wanted)

    def _name(self, name: str) -> str:
        return self._store.tagged_key("devices", "name", name)

    # -- the CLI: waits ------------------------------------------------------------------------
    def add(self, name: str) -> str:
        """Pair a device called ``name``; returns its token (the only time it exists in full)."""
        name = clean_name(name)
        token = new_token()
        wanted = digest(token)
        keys = [self._name(name), self._device(wanted), self._paired]
        with translated(self._store.url):
            added = self._add(keys=keys, args=[wanted, name, repr(self._clock())])
        if not added:
            raise name_taken(name)
        return token

    def devices(self) -> list[Device]:
        """Paired devices (not revoked), oldest first."""
        with translated(self._store.url):
            digests = cast(list[str], self._store.sync.zrange(self._paired, 0, -1))
            pipe = self._store.sync.pipeline(transaction=False)
            for each in digests:
                pipe.hgetall(self._device(each))
            rows = cast(list[dict[str, str]], pipe.execute())
        found = [
            Device(row["name"], float(row["created"]), _stamp(row.get("last_seen")))
            for row in rows
            if row and not row.get("revoked")
        ]
        return sorted(found, key=lambda d: (d.created, d.name))

    def revoke(self, name: str) -> None:
        """Revoke the device called ``name``: its token is refused from now on."""
        name = name.strip()
        keys = [self._name(name), self._paired]
        with translated(self._store.url):
            changed = self._revoke(keys=keys, args=[repr(self._clock()), self._device("")])
        if not changed:
            raise no_such_device(name)

    # -- the server ----------------------------------------------------------------------------
    async def check(self, token: str) -> Check:
        """Whose token is this? A paired device's ``last_seen`` becomes now."""
        wanted = digest(token)
        with translated(self._store.url):
            row = cast(
                list[str] | None,
                await self._check(keys=[self._device(wanted)], args=[repr(self._clock())]),
            )
        if not row or not hmac.compare_digest(row[0], wanted):
            return Check("unknown", wanted)
        _, name, revoked = row
        return Check("revoked" if revoked else "ok", wanted, name)

    async def revoked(self, digests: Collection[str]) -> set[str]:
        """Which of these (connected devices') digests are revoked or gone; the others'
        ``last_seen`` is refreshed when older than ``TOUCH_EVERY``."""
        wanted = sorted(set(digests))
        if not wanted:
            return set()
        now = self._clock()
        keys = [self._device(each) for each in wanted]
        with translated(self._store.url):
            gone = cast(
                list[int], await self._revoked(keys=keys, args=[repr(now), repr(now - TOUCH_EVERY)])
            )
        return {wanted[int(i) - 1] for i in gone}

    async def any_paired(self) -> bool:
        with translated(self._store.url):
            count: Any = await self._store.aio.zcard(self._paired)
        return bool(count)


def _stamp(raw: str | None) -> float | None:
    return None if raw is None else float(raw)


def devices_for(store: Store, shared: RedisStore | None) -> Devices:
    """Where paired devices live: for the server (``Runtime.create``) and ``iris devices``."""
    return SqliteDevices(store) if shared is None else RedisDevices(shared)

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
ones, which run on the store's thread (``iris.store``) and never block the event loop.

With a shared store (``store.url``) the devices live in Redis instead (``iris.redis.devices``);
``Devices`` is what both offer.
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
from typing import Literal, Protocol

from iris.errors import DeviceError
from iris.store import Store, transaction

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
    """Paired devices: ``DeviceStore`` (SQLite) or ``RedisDeviceStore``."""

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


class DeviceStore:
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

"""Paired devices in the shared store: ``DeviceStore``'s twin in Redis.

``iris devices add|list|revoke`` with ``store.url`` set writes here, and every process checks
tokens here, so a device paired once connects to any of them and a revoke reaches all of them
(each within ``REVOCATION_POLL``). Only digests are kept, as in SQLite (``iris.devices``):

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

import hmac
import time
from collections.abc import Callable, Collection
from typing import Any, cast

from iris.devices import (
    TOUCH_EVERY,
    Check,
    Device,
    Devices,
    DeviceStore,
    clean_name,
    digest,
    name_taken,
    new_token,
    no_such_device,
)
from iris.redis.connection import RedisStore, translated
from iris.store import Store

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


class RedisDeviceStore:
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


def device_store(store: Store, shared: RedisStore | None) -> Devices:
    """Where paired devices live: for the server (``Runtime.create``) and ``iris devices``."""
    return DeviceStore(store) if shared is None else RedisDeviceStore(shared)

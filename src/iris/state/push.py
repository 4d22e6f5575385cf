"""Web Push subscriptions: which browser (a push service endpoint and its keys) gets the
notifications of which chat, registered by the web app over the socket (``push.subscribe``).

``SqlitePushSubscriptions`` keeps them in the SQLite file (table ``iris_push``);
``RedisPushSubscriptions`` in one hash every process reads (``{push}:subscriptions``), so a
process that did not see the device subscribe still pushes to it. A subscription is dropped
when its push service answers 404 or 410 (``remove``) or with ``iris devices push-remove``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Protocol, cast

from iris.state.redis_store import RedisStore, translated
from iris.state.sqlite import Store

_DDL = """
CREATE TABLE IF NOT EXISTS iris_push (
    endpoint TEXT NOT NULL,
    chat TEXT NOT NULL,
    device TEXT NOT NULL,
    subscription TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (endpoint, chat)
);
CREATE INDEX IF NOT EXISTS iris_push_chat ON iris_push (chat);
"""


@dataclass(frozen=True, slots=True)
class PushSubscription:
    endpoint: str
    chat: str  # the iris chat id whose notifications it gets
    device: str  # the paired device that registered it
    subscription: dict[str, Any]  # as the browser gave it: {endpoint, keys: {p256dh, auth}}
    created: float


class PushSubscriptions(Protocol):
    async def add(self, subscription: PushSubscription) -> None:
        """Keep it (a later one for the same browser and chat replaces it)."""
        ...

    async def of_chat(self, chat: str) -> list[PushSubscription]: ...

    async def listed(self) -> list[PushSubscription]: ...

    async def remove(self, endpoint: str) -> bool:
        """Drop the browser ``endpoint`` (or a ``short`` id) for every chat."""
        ...


def _row(row: tuple[Any, ...]) -> PushSubscription:
    endpoint, chat, device, subscription, created = row
    return PushSubscription(endpoint, chat, device, json.loads(subscription), created)


class SqlitePushSubscriptions:
    def __init__(self, store: Store) -> None:
        self._store = store
        store.ensure_schema(_DDL)

    async def add(self, subscription: PushSubscription) -> None:
        s = subscription
        row = (s.endpoint, s.chat, s.device, json.dumps(s.subscription), s.created)
        query = "INSERT OR REPLACE INTO iris_push VALUES (?, ?, ?, ?, ?)"
        await self._store.run(lambda conn: conn.execute(query, row))

    async def _select(self, where: str, params: tuple[Any, ...]) -> list[PushSubscription]:
        query = f"SELECT * FROM iris_push WHERE {where} ORDER BY created"

        def read(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in conn.execute(query, params).fetchall()]

        return [_row(r) for r in await self._store.run(read, write=False)]

    async def of_chat(self, chat: str) -> list[PushSubscription]:
        return await self._select("chat=?", (chat,))

    async def listed(self) -> list[PushSubscription]:
        return await self._select("1=1", ())

    async def remove(self, endpoint: str) -> bool:
        query = "DELETE FROM iris_push WHERE endpoint=? OR substr(endpoint, -12)=?"
        gone = await self._store.run(lambda conn: conn.execute(query, (endpoint, endpoint)))
        return gone.rowcount > 0


class RedisPushSubscriptions:
    def __init__(self, store: RedisStore) -> None:
        self._store = store
        self._key = store.tagged_key("push", "subscriptions")

    async def add(self, subscription: PushSubscription) -> None:
        s = subscription
        record = {
            "chat": s.chat,
            "device": s.device,
            "subscription": s.subscription,
            "created": s.created,
        }
        with translated(self._store.url):
            await self._store.aio.hset(self._key, f"{s.chat} {s.endpoint}", json.dumps(record))

    async def listed(self) -> list[PushSubscription]:
        with translated(self._store.url):
            found = cast(dict[str, str], await self._store.aio.hgetall(self._key))
        subscriptions = [
            PushSubscription(
                name.split(" ", 1)[1], r["chat"], r["device"], r["subscription"], r["created"]
            )
            for name, r in ((n, json.loads(v)) for n, v in found.items())
        ]
        return sorted(subscriptions, key=lambda s: s.created)

    async def of_chat(self, chat: str) -> list[PushSubscription]:
        return [s for s in await self.listed() if s.chat == chat]

    async def remove(self, endpoint: str) -> bool:
        names = [
            f"{s.chat} {s.endpoint}"
            for s in await self.listed()
            if endpoint in (s.endpoint, short(s))
        ]
        if not names:
            return False
        with translated(self._store.url):
            await self._store.aio.hdel(self._key, *names)
        return True


def short(subscription: PushSubscription) -> str:
    """How ``iris devices push`` names a subscription: the last 12 characters of its endpoint."""
    return subscription.endpoint[-12:]


def new_subscription(chat: str, device: str, subscription: dict[str, Any]) -> PushSubscription:
    return PushSubscription(str(subscription["endpoint"]), chat, device, subscription, time.time())


def push_subscriptions_for(store: Store, shared: RedisStore | None) -> PushSubscriptions:
    """The SQLite file, or with a shared store (``store.url``) Redis."""
    return SqlitePushSubscriptions(store) if shared is None else RedisPushSubscriptions(shared)

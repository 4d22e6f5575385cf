"""Stored conversations in the shared store: ``ConversationsStore``'s twin in Redis.

Per conversation, two keys (named by ``conversation_keys`` alone, so a rename is one edit; both
carry the conversation id as one hash tag, so a Redis Cluster keeps them in one slot for the
``MULTI`` that writes them together):

- the object, a string (JSON);
- its items, a list of JSON items, oldest first.

Like stored responses they never expire: size Redis for them (docs/deploy.md).
"""

from __future__ import annotations

import json
from typing import Any, cast

from iris.redis.connection import RedisStore, translated

Json = dict[str, Any]


def conversation_keys(store: RedisStore, conversation_id: str) -> tuple[str, str]:
    """(the object's key, the items' key) of one conversation."""
    tagged = "{" + conversation_id + "}"
    return store.key("conversation", tagged), store.key("conversation", tagged, "items")


class RedisConversationsStore:
    def __init__(self, store: RedisStore) -> None:
        self._store = store

    async def create(self, conversation: Json, items: list[Json]) -> None:
        head, listed = conversation_keys(self._store, conversation["id"])
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.set(head, json.dumps(conversation))
                if items:
                    pipe.rpush(listed, *(json.dumps(item) for item in items))
                await pipe.execute()

    async def get(self, conversation_id: str) -> Json | None:
        head, _ = conversation_keys(self._store, conversation_id)
        with translated(self._store.url):
            raw = cast(str | None, await self._store.aio.get(head))
        return None if raw is None else json.loads(raw)

    async def update(self, conversation: Json) -> None:
        head, _ = conversation_keys(self._store, conversation["id"])
        with translated(self._store.url):
            await self._store.aio.set(head, json.dumps(conversation), xx=True)

    async def delete(self, conversation_id: str) -> bool:
        head, listed = conversation_keys(self._store, conversation_id)
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.delete(head)
                pipe.delete(listed)
                removed = cast(list[int], await pipe.execute())
        return bool(removed[0])

    async def items(self, conversation_id: str) -> list[Json] | None:
        head, listed = conversation_keys(self._store, conversation_id)
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                pipe.exists(head)
                pipe.lrange(listed, 0, -1)
                exists, rows = cast(tuple[int, list[str]], tuple(await pipe.execute()))
        return None if not exists else [json.loads(row) for row in rows]

    async def append(self, conversation_id: str, items: list[Json]) -> bool:
        head, listed = conversation_keys(self._store, conversation_id)
        with translated(self._store.url):
            if not await self._store.aio.exists(head):
                return False
            if items:
                await self._store.aio.rpush(listed, *(json.dumps(item) for item in items))
        return True

    async def delete_item(self, conversation_id: str, item_id: str) -> bool:
        _, listed = conversation_keys(self._store, conversation_id)
        with translated(self._store.url):
            rows = cast(list[str], await self._store.aio.lrange(listed, 0, -1))
            for row in rows:
                if json.loads(row).get("id") == item_id:
                    return bool(await self._store.aio.lrem(listed, 1, row))
        return False

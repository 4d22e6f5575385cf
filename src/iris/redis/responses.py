"""Stored responses in the shared store: ``ResponsesStore``'s twin in Redis.

A response stored by one process is read, and continued with ``previous_response_id``, through
any other:

- ``response:stored:{id}`` a hash: ``response`` (the object) and ``conversation`` (what
  ``previous_response_id`` continues);
- ``response:item:{item_id}`` each output item, for the ``item_reference`` input items;
  the hash's ``inputs`` field holds the request's input items and ``items`` the output item ids
  (what ``DELETE /v1/responses/{id}`` removes with it).

Each key is alone in its cluster slot: the items are written first (one key each), then the
response, so a response that can be read has its items.

Like the SQLite rows they never expire (OpenAI keeps them 30 days; Iris has no sweep for
either store): size Redis for them, see docs/deploy.md.
"""

from __future__ import annotations

import json
from typing import Any, cast

from redis.typing import EncodableT, FieldT

from iris.redis.connection import RedisStore, translated


class RedisResponsesStore:
    def __init__(self, store: RedisStore) -> None:
        self._store = store

    async def save(
        self,
        response: dict[str, Any],
        conversation: list[dict[str, Any]],
        inputs: list[dict[str, Any]] | None = None,
    ) -> None:
        # Every output item is kept under its own id too, for ``item_reference``.
        items = {
            self._store.key("response", "item", item["id"]): json.dumps(item)
            for item in response.get("output") or []
            if isinstance(item.get("id"), str)
        }
        fields: dict[FieldT, EncodableT] = {
            "response": json.dumps(response),
            "conversation": json.dumps(conversation),
            "items": json.dumps(
                [i["id"] for i in response.get("output") or [] if isinstance(i.get("id"), str)]
            ),
        }
        if inputs is not None:
            fields["inputs"] = json.dumps(inputs)
        with translated(self._store.url):
            if items:
                async with self._store.aio.pipeline(transaction=False) as pipe:
                    for key, value in items.items():
                        pipe.set(key, value)
                    await pipe.execute()
            await self._store.aio.hset(
                self._store.key("response", "stored", response["id"]), mapping=fields
            )

    async def response(self, response_id: str) -> dict[str, Any] | None:
        return await self._field("response", response_id)

    async def conversation(self, response_id: str) -> list[dict[str, Any]] | None:
        return await self._field("conversation", response_id)

    async def input_items(self, response_id: str) -> list[dict[str, Any]] | None:
        with translated(self._store.url):
            found = cast(
                list[str | None],
                await self._store.aio.hmget(
                    self._store.key("response", "stored", response_id), ["response", "inputs"]
                ),
            )
        if found[0] is None:
            return None
        return [] if found[1] is None else json.loads(found[1])

    async def delete(self, response_id: str) -> bool:
        key = self._store.key("response", "stored", response_id)
        with translated(self._store.url):
            raw = cast(str | None, await self._store.aio.hget(key, "items"))
            items = cast(list[str], json.loads(raw)) if raw else []
            async with self._store.aio.pipeline(transaction=False) as pipe:
                pipe.delete(key)
                for item_id in items:
                    pipe.delete(self._store.key("response", "item", item_id))
                removed = cast(list[int], await pipe.execute())
        return bool(removed and removed[0])

    async def _field(self, field: str, response_id: str) -> Any:
        with translated(self._store.url):
            raw = await self._store.aio.hget(
                self._store.key("response", "stored", response_id), field
            )
        return None if raw is None else json.loads(cast(str, raw))

    async def items(self, item_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Stored output items (messages, function calls, reasoning) by their ids."""
        unique = list(dict.fromkeys(item_ids))
        if not unique:
            return {}
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=False) as pipe:
                for each in unique:  # one key at a time: each in its own slot
                    pipe.get(self._store.key("response", "item", each))
                rows = cast(list[str | None], await pipe.execute())
        return {i: json.loads(row) for i, row in zip(unique, rows, strict=True) if row is not None}

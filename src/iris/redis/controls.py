"""A chat's controls in the shared store: ``MemoryControls``' twin in Redis.

One hash per session, ``chat:{session}:controls``: ``model`` (absent: the config's first
model), ``show_reasoning`` (``1``/``0``; absent: the config's), ``last_usage`` (JSON). A save
writes only the fields it names, in one ``MULTI``, so a turn's usage and a ``/model`` sent
through another process meanwhile both hold. Kept until the chat's data is removed by hand,
like its history.
"""

from __future__ import annotations

import json
from typing import cast

from iris.controls import Controls, Field
from iris.redis.connection import RedisStore, translated


class RedisControls:
    def __init__(self, store: RedisStore) -> None:
        self._store = store

    def _key(self, session: str) -> str:
        return self._store.key("chat", session, "controls")

    async def load(self, session: str) -> Controls:
        with translated(self._store.url):
            kept = cast(dict[str, str], await self._store.aio.hgetall(self._key(session)))
        reasoning = kept.get("show_reasoning")
        usage = kept.get("last_usage")
        return Controls(
            model=kept.get("model") or None,
            show_reasoning=None if reasoning is None else reasoning == "1",
            last_usage={} if usage is None else cast(dict[str, int], json.loads(usage)),
        )

    async def save(self, session: str, controls: Controls, *fields: Field) -> None:
        if not fields:
            return
        key = self._key(session)
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                for name in fields:
                    value = _encoded(controls, name)
                    if value is None:
                        pipe.hdel(key, name)
                    else:
                        pipe.hset(key, name, value)
                await pipe.execute()


def _encoded(controls: Controls, name: Field) -> str | None:
    """The hash value of one field; None: the field follows the config (no value kept)."""
    match name:
        case "model":
            return controls.model
        case "show_reasoning":
            return None if controls.show_reasoning is None else str(int(controls.show_reasoning))
        case "last_usage":
            return json.dumps(controls.last_usage)

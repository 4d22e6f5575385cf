"""Approval prompts any process can answer (``store.url``): what a button's token stands for.

A chat platform's approval prompt is sent by the process whose turn asks, and its buttons
carry a random token that process maps to the request (``iris.surfaces.chat.prompts``). With
several processes a press may reach another one (a bot's poller lease moved, a webhook behind
a load balancer); that one finds the prompt here, answers the request through the shared
broker (``iris.state.approvals``), and the turn goes on in the process that runs it, which
sees the answer and closes the prompt. Each prompt shown is the hash
``<prefix>{prompt:<token>}:open`` (the prompt's fields), kept until a minute past the request's
expiry; an answer given after the request ended is told who decided, as on the process itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from iris.state.redis_store import RedisStore, translated

if TYPE_CHECKING:
    from redis.typing import EncodableT, FieldT

KEPT_AFTER_S = 60  # seconds a prompt stays findable past its request's expiry


class SharedPrompts:
    def __init__(self, store: RedisStore, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock

    def _key(self, token: str) -> str:
        return self._store.tagged_key(f"prompt:{token}", "open")

    async def shown(self, token: str, fields: dict[str, str], expires_at: float) -> None:
        """The prompt of ``token`` is in a chat now, with ``fields`` (plain strings)."""
        ttl = max(1, int(expires_at - self._clock()) + KEPT_AFTER_S)
        key = self._key(token)
        with translated(self._store.url):
            async with self._store.aio.pipeline(transaction=True) as pipe:
                record: dict[FieldT, EncodableT] = {k: v for k, v in fields.items()}
                pipe.hset(key, mapping=record)
                pipe.expire(key, ttl)
                await pipe.execute()

    async def find(self, token: str) -> dict[str, str] | None:
        """The fields of the prompt behind ``token``, shown by any process (None: none)."""
        with translated(self._store.url):
            found = cast(dict[str, str], await self._store.aio.hgetall(self._key(token)))
        return found or None

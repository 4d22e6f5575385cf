"""Open elicitation requests in the shared store (``store.url``), so that an answer given to any
``iris serve`` process reaches the MCP call that asked, in the process that runs it.

The broker (``iris.agent.elicitation.Elicitations``) keeps its requests in memory and, with a
shared store, also here: one hash ``{elicitation:<id>}:request`` with the chat it waits in, the
form's schema and the link (``open``), gone ``KEPT_S`` seconds after it expires at the latest.
Another process that gets an answer finds the request (``find``), checks the content against
the schema as the asking one would, and writes it once (``answer``: ``HSETNX``, so the first
answer wins); the asking process reads it (``answered``) every ``POLL`` seconds while it waits,
and deletes the hash when the request ends (``close``).

A question asked by typed reply (WhatsApp) is answered by the person's next message in its
chat, which a webhook may bring to any process: while it waits, the chat names its request
(``{chat:<chat>}:asking``, ``asking``); a process that gets a message for that chat and does
not ask there itself finds the request (``asked``) and hands the text over
(``relay``: the list ``{elicitation:<id>}:replies``), and the asking one takes the replies
(``replies``) every ``POLL`` seconds and reads them as it reads its own: one that does not fit
is asked again from there. Every Redis failure is ``StoreUnavailable``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from iris.state.redis_store import DELETE_IF_HELD, RedisStore, translated

if TYPE_CHECKING:
    from redis.typing import EncodableT, FieldT

POLL = 0.25  # seconds between two reads of an answer given to another process
KEPT_S = 60  # a request's hash outlives its expiry by this much, at most


@dataclass(frozen=True, slots=True)
class OpenRequest:
    """A request as another process needs it to take an answer."""

    chat_id: str
    schema: dict[str, Any]
    url: str


@dataclass(frozen=True, slots=True)
class Reply:
    """A typed reply another process received for a question asked by reply: its text and
    who wrote it."""

    text: str
    by: str


@dataclass(frozen=True, slots=True)
class Given:
    """An answer written by some process: ``content`` only with ``accept``."""

    action: str
    content: dict[str, Any] | None
    by: str


class SharedElicitations:
    def __init__(self, shared: RedisStore) -> None:
        self._shared = shared
        # Forget a chat's question only while it is still that request's (a later one may
        # have begun).
        self._forget = shared.aio.register_script(DELETE_IF_HELD)

    def _key(self, elicitation_id: str) -> str:
        return self._shared.tagged_key(f"elicitation:{elicitation_id}", "request")

    async def open(self, elicitation_id: str, request: OpenRequest, ttl: float) -> None:
        key = self._key(elicitation_id)
        record: dict[FieldT, EncodableT] = {
            "chat": request.chat_id,
            "schema": json.dumps(request.schema),
            "url": request.url,
        }
        with translated(self._shared.url, "cannot share the request for input"):
            await self._shared.aio.hset(key, mapping=record)
            await self._shared.aio.expire(key, max(1, int(ttl) + KEPT_S))

    async def find(self, elicitation_id: str) -> OpenRequest | None:
        """The request, while it is open and unanswered."""
        with translated(self._shared.url):
            kept = cast(dict[str, str], await self._shared.aio.hgetall(self._key(elicitation_id)))
        if not kept or "answer" in kept:
            return None
        return OpenRequest(kept["chat"], json.loads(kept["schema"]), kept.get("url", ""))

    async def answer(self, elicitation_id: str, given: Given) -> bool:
        """Write the answer; False when one was written first."""
        written = json.dumps({"action": given.action, "content": given.content, "by": given.by})
        with translated(self._shared.url, "the answer was not recorded"):
            return bool(await self._shared.aio.hsetnx(self._key(elicitation_id), "answer", written))

    async def answered(self, elicitation_id: str) -> Given | None:
        with translated(self._shared.url):
            raw = await self._shared.aio.hget(self._key(elicitation_id), "answer")
        if raw is None:
            return None
        data = json.loads(cast(str, raw))
        return Given(str(data["action"]), data.get("content"), str(data.get("by", "")))

    async def close(self, elicitation_id: str) -> None:
        with translated(self._shared.url):
            await self._shared.aio.delete(self._key(elicitation_id), self._replies(elicitation_id))

    # -- questions asked by typed reply -----------------------------------------------------

    def _asking(self, chat_id: str) -> str:
        return self._shared.chat_key(chat_id, "asking")

    def _replies(self, elicitation_id: str) -> str:
        return self._shared.tagged_key(f"elicitation:{elicitation_id}", "replies")

    async def asking(self, chat_id: str, elicitation_id: str, ttl: float) -> None:
        """``chat_id``'s next message answers ``elicitation_id`` (for ``ttl`` seconds at most)."""
        with translated(self._shared.url, "cannot share the question"):
            await self._shared.aio.set(self._asking(chat_id), elicitation_id, ex=max(1, int(ttl)))

    async def asked(self, chat_id: str) -> str | None:
        """The request a question in ``chat_id`` waits for by reply, while it is open."""
        with translated(self._shared.url):
            found = cast(str | None, await self._shared.aio.get(self._asking(chat_id)))
        if found is None or await self.find(found) is None:
            return None
        return found

    async def done_asking(self, chat_id: str, elicitation_id: str) -> None:
        with translated(self._shared.url):
            await self._forget(keys=[self._asking(chat_id)], args=[elicitation_id])

    async def relay(self, elicitation_id: str, reply: Reply, ttl: float) -> None:
        """Hand ``reply`` to the process asking ``elicitation_id``."""
        key = self._replies(elicitation_id)
        with translated(self._shared.url, "the reply was not passed on"):
            async with self._shared.aio.pipeline(transaction=True) as pipe:
                pipe.rpush(key, json.dumps({"text": reply.text, "by": reply.by}))
                pipe.expire(key, max(1, int(ttl) + KEPT_S))
                await pipe.execute()

    async def replies(self, elicitation_id: str) -> list[Reply]:
        """The replies other processes handed over since the last call, oldest first."""
        key = self._replies(elicitation_id)
        with translated(self._shared.url):
            async with self._shared.aio.pipeline(transaction=True) as pipe:
                pipe.lrange(key, 0, -1)
                pipe.delete(key)
                taken, _ = await pipe.execute()
        return [Reply(str(d["text"]), str(d["by"])) for d in map(json.loads, taken)]


def shared_elicitations_for(shared: RedisStore | None) -> SharedElicitations | None:
    """The shared requests where processes share a store; None for a process alone."""
    return None if shared is None else SharedElicitations(shared)

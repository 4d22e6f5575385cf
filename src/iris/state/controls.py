"""A chat's controls (what its commands set) and where they are kept.

``Controls`` is a plain record: the model a chat uses, whether its reasoning is shown, and the
usage of its last reply. A ``ChatControls`` keeps them per session key: in this process's
memory (``MemoryControls``, a restart goes back to the config), or with a shared store in Redis
(``RedisControls``), so a ``/model`` sent through one process holds on every other.
``controls_for`` picks one; the surfaces read a chat's controls when a turn starts or a
command answers, and write only the fields they changed (a turn's usage never overwrites a
``/model`` another process took meanwhile).

**In Redis** (``RedisControls``): one hash per session, ``chat:{session}:controls``: ``model`` (absent: the config's first
model), ``show_reasoning`` (``1``/``0``; absent: the config's), ``last_usage`` (JSON). A save
writes only the fields it names, in one ``MULTI``, so a turn's usage and a ``/model`` sent
through another process meanwhile both hold. Kept until the chat's data is removed by hand,
like its history.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Literal, Protocol, cast

from iris.state.redis_store import RedisStore, translated

Field = Literal["model", "show_reasoning", "last_usage"]


@dataclass
class Controls:
    """One conversation's settings changed by commands; None follows the config."""

    model: str | None = None
    show_reasoning: bool | None = None
    last_usage: dict[str, int] = field(default_factory=dict[str, int])

    def reasoning(self, configured: bool) -> bool:
        return configured if self.show_reasoning is None else self.show_reasoning


class ChatControls(Protocol):
    async def load(self, session: str) -> Controls:
        """The controls of ``session`` (a fresh copy; the config's when none were set)."""
        ...

    async def save(self, session: str, controls: Controls, *fields: Field) -> None:
        """Keep ``fields`` of ``controls`` for ``session``; the others stay as they are."""
        ...


class MemoryControls:
    """Controls kept by this process alone (no shared store)."""

    def __init__(self) -> None:
        self._chats: dict[str, Controls] = {}

    async def load(self, session: str) -> Controls:
        kept = self._chats.get(session)
        if kept is None:
            return Controls()
        return dataclasses.replace(kept, last_usage=dict(kept.last_usage))

    async def save(self, session: str, controls: Controls, *fields: Field) -> None:
        kept = self._chats.setdefault(session, Controls())
        for name in fields:
            value = getattr(controls, name)
            setattr(kept, name, dict(value) if isinstance(value, dict) else value)


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


def controls_for(shared: RedisStore | None) -> ChatControls:
    """This process's memory, or with a shared store (``store.url``) Redis, which every process reads."""
    return MemoryControls() if shared is None else RedisControls(shared)

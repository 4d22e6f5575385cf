"""A chat's controls (what its commands set) and where they are kept.

``Controls`` is a plain record: the model a chat uses, whether its reasoning is shown, and the
usage of its last reply. A ``ControlsStore`` keeps them per session key: in this process's
memory (``MemoryControls``, a restart goes back to the config), or with a shared store in Redis
(``iris.redis.controls``), so a ``/model`` sent through one process holds on every other.
``Runtime.create`` picks the store; the surfaces read a chat's controls when a turn starts or a
command answers, and write only the fields they changed (a turn's usage never overwrites a
``/model`` another process took meanwhile).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal, Protocol

Field = Literal["model", "show_reasoning", "last_usage"]


@dataclass
class Controls:
    """One conversation's settings changed by commands; None follows the config."""

    model: str | None = None
    show_reasoning: bool | None = None
    last_usage: dict[str, int] = field(default_factory=dict[str, int])

    def reasoning(self, configured: bool) -> bool:
        return configured if self.show_reasoning is None else self.show_reasoning


class ControlsStore(Protocol):
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

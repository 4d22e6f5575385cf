"""The calls a reply's plan hands its transport (``Send``, ``Edit``, ``Delete``, ``Draft``) and
what it keeps of each message they change (``Slot``). Plain data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from iris.surfaces.chat.budget import Draws
from iris.surfaces.chat.platforms.base import Task

PREVIEW_ATTEMPTS = 3
FINAL_ATTEMPTS = 5


@dataclass
class Slot:
    kind: Literal["text", "tools", "notice"]
    want: str = ""
    final: bool = False  # ``want`` is settled: no cursor, must be delivered
    message_id: str | None = None
    shown: str | None = None  # what the platform shows; None until sent
    want_end: int = 0  # offset in the segment text where ``want``'s slice ends
    shown_end: int = 0  # the same for ``shown``
    failures: int = 0
    retry_at: float = float("-inf")
    dead: bool = False  # abandoned: never sent or edited again (except one cursor clean-up)
    cleaned: bool = False
    sealed: bool = False  # the platform has it as final (stream mode ends its stream there)
    sent_at: float = float("-inf")  # when its first text went out (fresh final)
    replaces: tuple[str, str] | None = None  # (message id, text) of the preview it replaces
    tasks: tuple[Task, ...] = ()  # a tool batch's calls (stream mode)
    shown_tasks: tuple[Task, ...] = ()

    @property
    def pending(self) -> bool:
        return not self.dead and bool(self.want) and self.want != self.shown


@dataclass(frozen=True, slots=True)
class Send:
    slot: int
    text: str
    end: int = 0  # offset in the segment text where this text's slice ends
    final: bool = False  # the message's last text: nothing follows it
    tasks: tuple[Task, ...] = ()


@dataclass(frozen=True, slots=True)
class Edit:
    slot: int
    message_id: str
    text: str
    end: int = 0
    cleanup: bool = False  # the one best-effort attempt to clear an abandoned cursor
    final: bool = False
    tasks: tuple[Task, ...] = ()


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete a preview whose text was sent anew (fresh final)."""

    message_id: str


@dataclass(frozen=True, slots=True)
class Draft:
    """Show ``text`` as the chat's draft ``draft_id`` (empty: "Thinking…")."""

    draft_id: int
    text: str


Action = Send | Edit | Draft | Delete


def waiting(want: str, shown: str | None) -> int:
    """How many more characters ``want`` has than the platform shows (``buffer_threshold``).

    A preview only grows while it streams, so the difference in length is the new text,
    counted without comparing the two (this runs on every delta)."""
    return 0 if shown is None else len(want) - len(shown)


def plain_draws(action: Send | Edit) -> Draws:
    """The calls of an edit transport: a send is a new message, an edit an edit."""
    return ("send",) if isinstance(action, Send) else ("edit",)

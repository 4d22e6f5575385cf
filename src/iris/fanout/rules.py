"""What the transport may do with a frame: the marks a protocol gives its frame types.

The fan-out (hub, per-device queue, frame log) moves frames it does not understand. A frame is a
plain JSON object with a ``type``; the protocol above (``iris.protocol.types``) hands
the transport a ``FrameRules`` that marks each type with ``Traits`` — which frames a later one
supersedes, which open and close a message, which connection answers need only one copy in
line — and builds the few frames and records only it can (``sync``, the transcript). Nothing in
``iris.fanout`` names a frame type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Frame = dict[str, Any]  # one frame as JSON data: the one declaration every layer uses
# What a frame's maker hands the transport: a ``Frame``, or a protocol's typed dict of one.
Body = Mapping[str, Any]
TRANSCRIPT_LIMIT = 500  # closed messages a frame log keeps per chat, for a ``sync``


@dataclass(frozen=True, slots=True)
class Traits:
    """What the transport may do with frames of one type (all off: deliver and keep as is)."""

    # A full snapshot of its message (``message_id``): any later frame of the same message
    # supersedes it, so a slow device may skip it and the log drops it once the message closes.
    snapshot: bool = False
    opens: bool = False  # begins a message, whose text is empty until a snapshot
    closes: bool = False  # ends its message: its snapshots leave the log
    # Connection-scoped answers of which one waiting is enough: "first" — the one already
    # waiting answers the new one too; "last" — the new one replaces the one waiting.
    one_pending: Literal["first", "last"] | None = None
    turn: bool = False  # says whether a turn is running (``FrameRules.turn_open``)


PLAIN = Traits()


class FrameRules(Protocol):
    """The protocol's side of the fan-out contract."""

    @property
    def marks(self) -> Mapping[str, Traits]:
        """Every frame type the protocol marks (the others are ``PLAIN``)."""
        ...

    def traits(self, kind: str) -> Traits:
        """The marks of frame type ``kind`` (``PLAIN`` for a type it does not mark)."""
        ...

    def snapshot_text(self, frame: Frame) -> str:
        """The message text a ``snapshot`` frame carries."""
        ...

    def snapshot_with(self, frame: Frame, text: str) -> Frame:
        """A copy of the ``snapshot`` frame carrying ``text`` instead (the log stores a live
        message's text once, as it grows, and each snapshot without it)."""
        ...

    def transcript_entry(self, frame: Frame) -> dict[str, Any] | None:
        """The conversation entry a frame leaves (a closed message), or None."""
        ...

    def sync(self, messages: list[dict[str, Any]], epoch: str, approvals: list[Frame]) -> Frame:
        """The connection-scoped frame that replaces a device's view with ``messages``, of the
        log's ``epoch`` (it changes whenever the chat's seqs restart), with the chat's
        ``approvals`` still open (request frames)."""
        ...

    def turn_open(self, frame: Frame) -> bool:
        """For a ``turn`` frame: does a turn run after it?"""
        ...


class DeviceWriter(Protocol):
    """Rewrites one device's frames as they leave its queue (e.g. snapshots as appends)."""

    def convert(self, frame: Frame) -> Frame | None:
        """The frame to send in place of ``frame``; None: send ``frame`` itself."""
        ...

    def forget(self) -> None:
        """The device's view is replaced (a resume): start over."""
        ...

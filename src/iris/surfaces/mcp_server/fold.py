"""A turn's reply as an outside caller sees it, folded from the chat's iris frames.

``ReplyFold`` is the pure core of ``chat_send`` (MCP server mode) and of the A2A server's
artifact updates: it takes the frames a subscription yields, one at a time, and says what the
caller should be told (the reply's text so far, an approval that waits) and when the turn is
over. No I/O: tests feed it lists of frames.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Frame = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Waiting:
    """An approval the turn waits for (``approval.request``), in plain data."""

    approval_id: str
    name: str
    args: dict[str, Any]
    preview: str
    expires_at: float

    def line(self) -> str:
        return (
            f"waiting for approval {self.approval_id}: {self.name}: {self.preview}"
            " (answer with approval_respond)"
        )


@dataclass
class ReplyFold:
    """The reply of one turn: its segments' text in order, how it ended."""

    segments: dict[str, str] = field(default_factory=dict[str, str])
    error: tuple[str, str] | None = None  # (code, message) of the turn's ``error`` frame
    done: bool = False  # the turn's last frame (``typing {on: false}``) came

    @property
    def text(self) -> str:
        """Every segment's text so far, a blank line between two."""
        return "\n\n".join(t for t in self.segments.values() if t)

    def feed(self, frame: Frame) -> str | Waiting | None:
        """Take one frame; the reply's new text when it grew, an approval when one waits,
        else None."""
        kind = frame.get("type")
        if kind == "typing" and frame.get("on") is False:
            self.done = True
        elif kind == "error":
            self.error = (str(frame.get("code", "error")), str(frame.get("message", "")))
        elif kind == "approval.request":
            return Waiting(
                str(frame["approval_id"]),
                str(frame["name"]),
                dict(frame.get("args") or {}),
                str(frame.get("preview", "")),
                float(frame.get("expires_at", 0.0)),
            )
        elif kind in ("message.start", "message.update", "message.stop", "message", "commentary"):
            return self._text(kind, frame)
        return None

    def _text(self, kind: str, frame: Frame) -> str | None:
        if kind == "message" and frame.get("role") != "assistant":
            return None  # the user's echo
        message_id = str(frame["message_id"])
        if kind == "message.start":
            self.segments.setdefault(message_id, "")
            return None
        # ``commentary``: the text before a tool call, whole (a log replay keeps it in place of
        # the message's updates).
        text = frame.get("final_text") if kind == "message.stop" else frame.get("text")
        if not isinstance(text, str) or self.segments.get(message_id) == text:
            return None
        self.segments[message_id] = text
        return self.text


def growth(before: str, text: str) -> tuple[str, bool]:
    """What a reader who has ``before`` needs to have ``text``: the piece to append (``True``),
    or, when ``text`` does not extend ``before`` (a rewrite), all of it to replace (``False``)."""
    if text.startswith(before):
        return text[len(before) :], True
    return text, False

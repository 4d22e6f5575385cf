"""ApprovalCard: a tool call waiting for a person's yes or no, as the apps show it.

The chat's view model keeps one card per ``approval_id`` (a bubble of kind ``approval`` under
the turn): ``approval.request`` makes it, ``approval.resolved`` ends it (the decision and who
made it; also ``timeout`` and ``cancelled``), and an ``error`` frame coded ``approval_decided``
or ``approval_unknown`` answers this device's late press. Until it is decided the card offers
the three answers (:data:`DECISIONS`) and counts down to ``expires_at`` (Unix seconds, so the
clock handed in is the wall clock). The command and arguments are shown whole, a long one in a
collapsed block (:func:`is_long`), never cut while the buttons are live, and drawn as the shell
reads them (:mod:`iris.formats.visible`: an invisible or control character as ``⟨U+XXXX⟩``,
with a warning line above).

The twin of ``src/iris/web/js/approval.js``: the same frames give the same cards
(``state()``; ``tests/web`` compares the two).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from iris.formats import visible

Answer = Literal["once", "chat", "deny"]
"""What a person may send (``approval.respond``'s ``decision``)."""

DECISIONS: tuple[tuple[Answer, str], ...] = (
    ("once", "Allow once"),
    ("chat", "Allow in this chat"),
    ("deny", "Deny"),
)

# Longer than this and the command goes in a collapsed, scrollable block (never cut).
LONG_LINES = 6
LONG_CHARS = 400

# The error codes the server answers a late or unknown approval.respond with.
REFUSED = {
    "approval_decided": "Already decided",
    "approval_unknown": "This request is no longer open",
}


@dataclass
class ApprovalCard:
    approval_id: str
    index: int
    name: str
    args: dict[str, Any]  # the call's whole arguments (an object, as tool.start carries them)
    preview: str  # the human rendering; for terminal the whole command
    expires_at: float
    decision: str | None = None  # once | chat | deny | timeout | cancelled; None while it waits
    by: str = ""
    sent: Answer | None = None  # this device's answer, until decided (or the link drops)
    note: str = ""

    @property
    def pending(self) -> bool:
        return self.decision is None

    def resolve(self, decision: str, by: str) -> None:
        self.decision = decision
        self.by = by

    def answered(self, decision: Answer) -> None:
        """This device's answer went out: the buttons wait for the server's word."""
        if self.pending:
            self.sent = decision

    def reconnected(self) -> None:
        """A new connection: an answer that was in flight may never have arrived."""
        if self.pending:
            self.sent = None

    def refused(self, code: str, message: str) -> None:
        self.note = REFUSED.get(code) or message or code
        self.sent = None

    @property
    def outcome(self) -> str:
        """What the card says once it is over; "" while it waits."""
        return outcome_text(self.decision, self.by)

    @property
    def args_text(self) -> str:
        """The arguments as a person reads them: indented JSON (as ``JSON.stringify`` indents)."""
        return json.dumps(self.args, indent=2, ensure_ascii=False)

    @property
    def shown(self) -> tuple[str, str, str]:
        """What the card draws: the command, the arguments (invisible characters as
        ``⟨U+XXXX⟩``), and the warning line ("" when nothing was hidden)."""
        preview, args = self.preview, self.args_text
        alarm = visible.warning(preview) or visible.warning(args)
        return visible.shown(preview), visible.shown(args), alarm

    def state(self, now: float) -> list[object]:
        """What the card holds and says at ``now``, as ``cardState`` in approval.js gives it."""
        return [
            self.approval_id,
            self.index,
            self.name,
            self.preview,
            self.args_text,
            self.expires_at,
            self.decision,
            self.by,
            self.sent,
            self.note,
            self.outcome,
            countdown_text(self.expires_at, now),
            is_long(self.preview),
            is_long(self.args_text),
        ]


def is_approval_error(code: str) -> bool:
    return code in REFUSED


def outcome_text(decision: str | None, by: str) -> str:
    who = f" by {by}" if by else ""
    if decision is None:
        return ""
    if decision == "once":
        return f"Allowed once{who}"
    if decision == "chat":
        return f"Allowed in this chat{who}"
    if decision == "deny":
        return f"Denied{who}"
    if decision == "timeout":
        return "Timed out — not run"
    return f"Cancelled{f' ({by})' if by else ''} — not run"


def countdown_text(expires_at: float, now: float) -> str:
    """Seconds left as m:ss, never below 0:00."""
    left = max(0, math.ceil(expires_at - now))
    return f"{left // 60}:{left % 60:02d}"


def is_long(text: str) -> bool:
    return len(text) > LONG_CHARS or text.count("\n") + 1 > LONG_LINES


def long_summary(label: str, text: str) -> str:
    """The line a collapsed block shows: what it holds, not a cut of it."""
    return f"{label} — {text.count(chr(10)) + 1} lines, {len(text)} characters"

"""An approval card under its turn: the tool, its whole command, the three answers, a countdown.

A thin view over the :class:`ApprovalCard` of a bubble of kind ``approval``: a press posts
:class:`ApprovalPanel.Decided` (the app sends ``approval.respond``); once the card is decided
the buttons go and the decision and who made it show. The command and arguments are the
model's text: every ``Static`` here has ``markup=False``, so no ``[...]`` in them styles or
links anything. A long one sits in a collapsed, scrollable block, whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Collapsible, Static

from iris.app.core.approval import (
    DECISIONS,
    Answer,
    ApprovalCard,
    countdown_text,
    is_long,
    long_summary,
)
from iris.app.core.view import Bubble
from iris.app.settings import ToolDetail


class ApprovalPanel(Vertical):
    DEFAULT_CSS = """
    ApprovalPanel {
        height: auto; margin: 0 1 1 1; padding: 0 1;
        border-left: thick $warning; background: $surface;
    }
    ApprovalPanel.resolved { border-left: thick $panel; }
    ApprovalPanel .approval-head { text-style: bold; }
    ApprovalPanel .approval-text { padding: 0 1; background: $boost; }
    ApprovalPanel VerticalScroll { height: auto; max-height: 12; }
    ApprovalPanel Collapsible { border: none; padding: 0; margin: 0; background: transparent; }
    ApprovalPanel Horizontal { height: auto; margin: 1 0 0 0; }
    ApprovalPanel Button { margin: 0 1 0 0; min-width: 10; }
    ApprovalPanel .approval-outcome { text-style: bold; }
    ApprovalPanel .approval-outcome.allowed { color: $text-success; }
    ApprovalPanel .approval-outcome.refused { color: $text-error; }
    ApprovalPanel .approval-note { color: $text-muted; }
    ApprovalPanel .approval-warning { color: $text-warning; text-style: bold; }
    """

    class Decided(Message):
        """The person pressed one of the card's buttons."""

        def __init__(self, approval_id: str, decision: Answer) -> None:
            super().__init__()
            self.approval_id = approval_id
            self.decision: Answer = decision

    def __init__(self, bubble: Bubble, wall_clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.bubble = bubble
        self.message_id = bubble.message_id
        self.seen_version = bubble.version
        self._wall_clock = wall_clock
        self._head = Static("", classes="approval-head", markup=False)
        self._collapsed: dict[str, bool] = {}  # what the person opened or closed, by block

    @property
    def card(self) -> ApprovalCard:
        assert self.bubble.approval is not None
        return self.bubble.approval

    def compose(self) -> ComposeResult:
        card = self.card
        self.set_class(not card.pending, "resolved")
        self._head.update(self._head_text())
        yield self._head
        folded = self._collapsed
        command, args, alarm = card.shown
        if alarm:
            yield Static(alarm, classes="approval-warning", markup=False)
        if command:
            yield _block(command, "Show the full command", "command", folded.get("command", True))
        yield _block(args, "Arguments", "args", folded.get("args", bool(command)), titled=True)
        if card.pending:
            yield Horizontal(
                *(
                    Button(
                        label,
                        id=f"approval-{decision}",
                        variant="primary" if decision == "once" else "default",
                        disabled=card.sent is not None or self._expired(),
                    )
                    for decision, label in DECISIONS
                )
            )
        else:
            allowed = card.decision in ("once", "chat")
            yield Static(
                card.outcome,
                classes=f"approval-outcome {'allowed' if allowed else 'refused'}",
                markup=False,
            )
        if card.note:
            yield Static(card.note, classes="approval-note", markup=False)

    def on_mount(self) -> None:
        self.set_interval(1, self._tick)

    def _head_text(self) -> str:
        card = self.card
        if not card.pending:
            return f"🔒 Asked to run {card.name}"
        return f"✋ Run {card.name}?   ⏳ {countdown_text(card.expires_at, self._wall_clock())}"

    def _expired(self) -> bool:
        """Past ``expires_at`` the server has timed it out (its approval.resolved is on the
        way): the buttons go dead."""
        return self.card.expires_at <= self._wall_clock()

    def _tick(self) -> None:
        if self.card.pending:
            self._head.update(self._head_text())
            if self._expired():
                for button in self.query(Button):
                    button.disabled = True

    def sync(self, bubble: Bubble, detail: ToolDetail, frame: int) -> None:
        """Redraw when the card changed, keeping the blocks the person opened."""
        self.bubble = bubble
        if bubble.version == self.seen_version:
            return
        self.seen_version = bubble.version
        for block in self.query(Collapsible):
            if block.id:
                self._collapsed[block.id.removeprefix("approval-block-")] = block.collapsed
        self.refresh(recompose=True)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        for decision, _label in DECISIONS:
            if event.button.id == f"approval-{decision}":
                self.post_message(self.Decided(self.card.approval_id, decision))


def _block(text: str, label: str, key: str, collapsed: bool, *, titled: bool = False) -> Widget:
    """Untrusted text, whole: inline when short, else collapsed and scrollable."""
    body = VerticalScroll(Static(text, classes="approval-text", markup=False))
    if not is_long(text) and not titled:
        return body
    title = long_summary(label, text) if is_long(text) else label
    return Collapsible(body, title=title, collapsed=collapsed, id=f"approval-block-{key}")

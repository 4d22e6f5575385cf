"""An elicitation card under its turn: the server's question, its form, Send / Decline / Cancel.

A thin view over the :class:`ElicitationCard` of a bubble of kind ``elicitation``: one input
per field (a text or number box, a checkbox for a boolean, a choice for an enum, the required
ones marked ``*``), or the link of a URL-mode request. Send reads the fields
(``iris.agent.forms.read``) and posts :class:`ElicitationPanel.Answered` (the app sends
``elicitation.respond``); a field that cannot be read, or the server's ``elicitation_invalid``,
shows why and the form stays, with what was entered. Every ``Static`` has ``markup=False``:
the server's text styles nothing.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Input, Link, Select, Static

from iris.agent.forms import Field, Unreadable, read
from iris.app.core.elicitation import ElicitationCard
from iris.app.core.view import Bubble
from iris.app.settings import ToolDetail

ACTIONS = (("accept", "Send"), ("decline", "Decline"), ("cancel", "Cancel"))


class ElicitationPanel(Vertical):
    DEFAULT_CSS = """
    ElicitationPanel {
        height: auto; margin: 0 1 1 1; padding: 0 1;
        border-left: thick $accent; background: $surface;
    }
    ElicitationPanel.resolved { border-left: thick $panel; }
    ElicitationPanel .elicit-head { text-style: bold; }
    ElicitationPanel .elicit-label { margin: 1 0 0 0; }
    ElicitationPanel Horizontal { height: auto; margin: 1 0 0 0; }
    ElicitationPanel Button { margin: 0 1 0 0; min-width: 10; }
    ElicitationPanel .elicit-note { color: $text-error; }
    ElicitationPanel .elicit-outcome { text-style: bold; }
    """

    class Answered(Message):
        """The person pressed Send (with the form's content), Decline or Cancel."""

        def __init__(self, elicitation_id: str, action: str, content: dict[str, Any] | None):
            super().__init__()
            self.elicitation_id = elicitation_id
            self.action = action
            self.content = content

    def __init__(self, bubble: Bubble) -> None:
        super().__init__()
        self.bubble = bubble
        self.message_id = bubble.message_id
        self.seen_version = bubble.version

    @property
    def card(self) -> ElicitationCard:
        assert self.bubble.elicitation is not None
        return self.bubble.elicitation

    def compose(self) -> ComposeResult:
        card = self.card
        self.set_class(not card.pending, "resolved")
        yield Static(f"❓ {card.head}", classes="elicit-head", markup=False)
        if card.url:
            yield Link(card.url, url=card.url, id="elicit-link")
        for i, field in enumerate(card.fields):
            yield from _field(i, field, card.values.get(field.name), card.pending)
        if card.note:
            yield Static(f"⚠ {card.note}", classes="elicit-note", markup=False)
        if card.pending:
            send = "Open and continue" if card.url else "Send"
            yield Horizontal(
                *(
                    Button(send if a == "accept" else label, id=f"elicit-{a}")
                    for a, label in ACTIONS
                )
            )
        else:
            yield Static(card.outcome, classes="elicit-outcome", markup=False)

    def sync(self, bubble: Bubble, detail: ToolDetail, frame: int) -> None:
        """Redraw when the card changed, keeping what was entered."""
        self.bubble = bubble
        if bubble.version == self.seen_version:
            return
        self.seen_version = bubble.version
        if self.card.pending:
            self.card.values.update(self._raw())
        self.refresh(recompose=True)

    def _raw(self) -> dict[str, Any]:
        """What the inputs hold now, by field name."""
        raw: dict[str, Any] = {}
        for i, field in enumerate(self.card.fields):
            for widget in self.query(f"#elicit-field-{i}"):
                if isinstance(widget, Input | Checkbox):
                    raw[field.name] = widget.value
                elif isinstance(widget, Select):
                    raw[field.name] = None if widget.is_blank() else widget.value
        return raw

    def content(self) -> dict[str, Any]:
        """The answer's content (``Unreadable`` names a field that cannot be read)."""
        content: dict[str, Any] = {}
        for field in self.card.fields:
            value = self.card.values.get(field.name)
            if field.kind == "boolean":
                content[field.name] = bool(value)
            elif field.kind == "choice":
                if value is not None:
                    content[field.name] = field.choices[int(value)].value
            elif isinstance(value, str) and value.strip():
                try:
                    content[field.name] = read(field, value)
                except Unreadable as exc:
                    raise Unreadable(f"'{field.name}' {exc}") from None
        return content

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        action = (event.button.id or "").removeprefix("elicit-")
        if action != "accept":
            self.post_message(self.Answered(self.card.elicitation_id, action, None))
            return
        self.card.values.update(self._raw())
        try:
            content = None if self.card.url else self.content()
        except Unreadable as exc:
            self.card.refused(str(exc))
            self.bubble.version += 1
            return
        self.post_message(self.Answered(self.card.elicitation_id, "accept", content))


def _field(i: int, field: Field, value: Any, live: bool) -> list[Widget]:
    """A field's label and input, holding what was entered."""
    widget_id = f"elicit-field-{i}"
    if field.kind == "boolean":
        return [Checkbox(Text(field.question), bool(value), id=widget_id, disabled=not live)]
    label = Static(field.question, classes="elicit-label", markup=False)
    if field.kind == "choice":
        options = [(c.label, j) for j, c in enumerate(field.choices)]
        chosen = value if isinstance(value, int) else Select.NULL
        select = Select(options, value=chosen, id=widget_id, allow_blank=True, disabled=not live)
        return [label, select]
    kind = "integer" if field.kind == "integer" else "number" if field.kind == "number" else "text"
    text = value if isinstance(value, str) else ""
    return [label, Input(text, type=kind, id=widget_id, disabled=not live)]

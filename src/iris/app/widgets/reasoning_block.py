"""The reasoning block above an answer: collapsible, monospace, with a copy button."""

from __future__ import annotations

from textual import on
from textual.containers import Horizontal
from textual.widgets import Button, Collapsible, Static

LONG = 400  # characters; longer reasoning starts collapsed


class ReasoningBlock(Collapsible):
    DEFAULT_CSS = """
    ReasoningBlock { background: $boost; margin: 0 0 1 0; padding: 0; border: none; }
    ReasoningBlock .reasoning-text { color: $text-muted; padding: 0 1; }
    ReasoningBlock Horizontal { height: auto; }
    ReasoningBlock Button { min-width: 8; height: 1; border: none; }
    """

    def __init__(self, text: str) -> None:
        self.text = text
        long = len(text) > LONG or text.count("\n") > 8
        super().__init__(
            Static(text, classes="reasoning-text", markup=False),
            Horizontal(Button("⧉ Copy", id="copy-reasoning", compact=True)),
            title="💭 Reasoning",
            collapsed=long,
        )

    def set_text(self, text: str) -> None:
        self.text = text
        self.query_one(".reasoning-text", Static).update(text)

    @on(Button.Pressed, "#copy-reasoning")
    def _copy(self, event: Button.Pressed) -> None:
        event.stop()
        self.app.copy_to_clipboard(self.text)
        self.app.notify("Reasoning copied to the clipboard")

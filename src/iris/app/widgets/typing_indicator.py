"""The typing indicator above the composer, animated by the app's frame tick."""

from __future__ import annotations

from textual.widgets import Static

DOTS = ("●∙∙", "∙●∙", "∙∙●", "∙●∙")


class TypingIndicator(Static):
    DEFAULT_CSS = """
    TypingIndicator { height: 1; padding: 0 2; color: $text-muted; display: none; }
    TypingIndicator.on { display: block; }
    """

    def show(self, on: bool, frame: int) -> None:
        self.set_class(on, "on")
        if on:
            self.update(f"iris is typing {DOTS[frame // 4 % len(DOTS)]}")

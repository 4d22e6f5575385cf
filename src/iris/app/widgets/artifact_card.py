"""The HTML artifact card: a reply that carries HTML can be opened in a browser or saved."""

from __future__ import annotations

import webbrowser
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button, Label


def artifact_path(message_id: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in message_id)
    return Path.home() / ".iris" / "artifacts" / f"{safe}.html"


class ArtifactCard(Horizontal):
    DEFAULT_CSS = """
    ArtifactCard { height: auto; background: $boost; padding: 0 1; margin: 1 0 0 0; }
    ArtifactCard Label { padding: 0 1 0 0; }
    ArtifactCard Button { margin: 0 1 0 0; }
    """

    def __init__(self, message_id: str, html: str) -> None:
        super().__init__()
        self.message_id = message_id
        self.html = html

    def compose(self) -> ComposeResult:
        yield Label("🌐 HTML artifact")
        yield Button("Open in browser", id="open-artifact", compact=True)
        yield Button("Save", id="save-artifact", compact=True)

    def save(self) -> Path:
        path = artifact_path(self.message_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.html)
        return path

    @on(Button.Pressed, "#open-artifact")
    def _open(self, event: Button.Pressed) -> None:
        event.stop()
        webbrowser.open(self.save().as_uri())

    @on(Button.Pressed, "#save-artifact")
    def _save(self, event: Button.Pressed) -> None:
        event.stop()
        self.app.notify(f"Saved to {self.save()}")

"""The file picker (F3): a folder tree to pick a file from, or a path to type or paste.

It answers the chosen path (``dismiss``); the app attaches it (:mod:`iris.app.core.attach`),
so the caps and the lines about them are the browser's. Escape closes it with nothing.
"""

from __future__ import annotations

from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DirectoryTree, Input, Label

from iris.surfaces.cli.staged import path_of


class AttachScreen(ModalScreen[Path | None]):
    AUTO_FOCUS = "#path"  # a path can be pasted at once; Tab goes to the tree
    BINDINGS = [Binding("escape", "dismiss_screen", "Close")]
    DEFAULT_CSS = """
    AttachScreen { align: center middle; }
    AttachScreen > Vertical {
        width: 80%; height: 80%; background: $panel; padding: 1 2; border: round $accent;
    }
    AttachScreen DirectoryTree { height: 1fr; margin: 1 0 0 0; }
    """

    def __init__(self, start: Path) -> None:
        super().__init__()
        self.start = start

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Attach a file: pick one, or type or paste its path and press Enter")
            yield Input(placeholder=f"{self.start}/…", id="path")
            yield DirectoryTree(self.start, id="tree")

    @on(DirectoryTree.FileSelected)
    def _picked(self, event: DirectoryTree.FileSelected) -> None:
        self.dismiss(Path(event.path))

    @on(Input.Submitted, "#path")
    def _typed(self, event: Input.Submitted) -> None:
        if event.value.strip():
            path = path_of(event.value)
            self.dismiss(path if path.is_absolute() else self.start / path)

    def action_dismiss_screen(self) -> None:
        self.dismiss(None)

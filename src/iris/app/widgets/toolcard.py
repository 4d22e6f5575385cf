"""A tool call under its message: spinner until it ends, then ✓ or ✗ and the duration.

How much shows follows the Tool detail setting: everything (name, args, output), truncated
(one ``emoji name: "preview"`` line that expands), or nothing.
"""

from __future__ import annotations

import json

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Collapsible, Static

from iris.app.core.view import ToolCall
from iris.app.settings import ToolDetail
from iris.formats.tool_summary import clip, summarize

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_EMOJI = {"terminal": "💻", "read_file": "📄", "write_file": "📝", "web_search": "🔎"}
PREVIEW_CHARS = 48


def status_mark(call: ToolCall, frame: int) -> str:
    if call.ok is None:
        return SPINNER[frame % len(SPINNER)]
    return "✓" if call.ok else "✗"


def summary(call: ToolCall, frame: int, *, preview: bool) -> str:
    emoji = _EMOJI.get(call.name, "🔧")
    line = f"{status_mark(call, frame)} {emoji} {call.name}"
    if preview:
        short = clip(call.preview, PREVIEW_CHARS) or summarize(call.args, PREVIEW_CHARS)
        line += f': "{short}"'
    if call.duration is not None:
        line += f" · {call.duration:.1f}s"
    elif call.notes:
        line += f" · {call.notes[-1]}"
    return line


class ToolCard(Vertical):
    DEFAULT_CSS = """
    ToolCard { height: auto; margin: 0 0 0 0; }
    ToolCard.nothing { display: none; }
    ToolCard .tool-head { color: $text-muted; }
    ToolCard .tool-args { color: $text-muted; padding: 0 1; }
    ToolCard .tool-output { color: $text-muted; padding: 0 1; text-style: italic; }
    ToolCard Collapsible { border: none; padding: 0; margin: 0; background: transparent; }
    ToolCard.failed .tool-head { color: $error; }
    """

    def __init__(self, call: ToolCall, detail: ToolDetail) -> None:
        super().__init__(classes=detail)
        self.call = call
        self.detail: ToolDetail = detail
        self._frame = 0

    def compose(self) -> ComposeResult:
        args = json.dumps(self.call.args, indent=2, ensure_ascii=False)
        output = Static(self._output_text(), classes="tool-output", markup=False)
        if self.detail == "everything":
            yield Static(self._head(), classes="tool-head", markup=False)
            yield Collapsible(
                Static(args, classes="tool-args", markup=False), title="args", collapsed=False
            )
            yield output
        elif self.detail == "truncated":
            yield Collapsible(
                Static(args, classes="tool-args", markup=False),
                output,
                title=self._head(),
                collapsed=True,
            )

    def _head(self) -> str:
        return summary(self.call, self._frame, preview=self.detail == "truncated")

    def _output_text(self) -> str:
        return f"→ {self.call.output_preview}" if self.call.output_preview else ""

    def set_detail(self, detail: ToolDetail) -> None:
        if detail != self.detail:
            self.detail = detail
            self.set_classes(detail)
            self.refresh(recompose=True)

    def update_call(self, call: ToolCall, frame: int) -> None:
        """Repaint the status line (spinner, ✓/✗, duration) and the output preview."""
        self.call = call
        self._frame = frame
        self.set_class(call.ok is False, "failed")
        if self.detail == "everything":
            for head in self.query(".tool-head").results(Static):
                head.update(self._head())
        elif self.detail == "truncated":
            for collapsible in self.query(Collapsible):
                collapsible.title = self._head()
        for output in self.query(".tool-output").results(Static):
            output.update(self._output_text())

"""Markdown drawn as cached lines (Textual's Line API), so layout cost does not grow with a reply.

A widget per Markdown element (what Textual's ``Markdown`` mounts) makes every layout walk the
whole reply: a frame cost 30 ms at the start of a long reply and 200 ms a few thousand
characters later. Here each settled block is rendered to lines once, from its source through
Rich's public ``Markdown`` (Rich parses the one block again: small, and its tokens stay Rich's
own business), and a bubble's body is two widgets whatever its length.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from rich.console import Console
from rich.markdown import Markdown as RichMarkdown
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from iris.app.core.mdstream import Block


def render_markdown(source: str, console: Console, width: int, style: Style) -> list[Strip]:
    """Rich's Markdown renderer over one block's (or the tail's) source."""
    markdown = RichMarkdown(source, code_theme="monokai", hyperlinks=False)
    options = console.options.update_width(max(width, 1))
    lines = console.render_lines(markdown, options, style=style, pad=True)
    # Rich opens a list with an empty line; the gap between blocks is ours to draw.
    while lines and _blank(lines[0], style):
        lines.pop(0)
    while lines and _blank(lines[-1], style):
        lines.pop()
    return [Strip(Segment.adjust_line_length(line, width, style), width) for line in lines]


def _blank(line: list[Segment], base: Style) -> bool:
    """Empty and without a background of its own (a code block's padding is not blank)."""
    return all(
        not segment.text.strip()
        and (segment.style is None or segment.style.bgcolor in (None, base.bgcolor))
        for segment in line
    )


def warm_up_highlighting() -> None:
    """Look up a lexer name that does not exist, once, off the render path.

    An unknown fence language (``pyth`` while ``python`` is still arriving, or ``mermaid``) makes
    Pygments import every installed plugin once — ~400 ms that would otherwise land on one
    frame in the middle of a reply."""
    from pygments.lexers import find_lexer_class_by_name
    from pygments.util import ClassNotFound

    with contextlib.suppress(ClassNotFound):
        find_lexer_class_by_name("iris-warm-up")
    find_lexer_class_by_name("python")  # the most common fence: its import too


class MarkdownLines(Widget):
    """Base: a list of strips with the height it implies."""

    DEFAULT_CSS = "MarkdownLines { height: auto; width: 1fr; }"

    def __init__(self) -> None:
        super().__init__()
        self._width = -1

    def lines_for(self, width: int) -> list[Strip]:
        raise NotImplementedError

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines_for(width))

    def render_line(self, y: int) -> Strip:
        lines = self.lines_for(self.size.width)
        return lines[y] if y < len(lines) else Strip.blank(self.size.width, self.rich_style)


class SettledLines(MarkdownLines):
    """Settled blocks: each rendered once (again only if the width changes), never touched."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[Block] = []
        self._rendered: list[list[Strip]] = []
        self._lines: list[Strip] = []
        self.renders = 0  # block renders, for tests: equals len(blocks) at a fixed width

    def add(self, blocks: Sequence[Block]) -> None:
        self.blocks.extend(blocks)
        self.refresh(layout=True)

    def clear(self) -> None:
        self.blocks = []
        self._rendered = []
        self._lines = []
        self.refresh(layout=True)

    def lines_for(self, width: int) -> list[Strip]:
        if width != self._width:
            self._width = width
            self._rendered = []
            self._lines = []
        style = self.rich_style
        for block in self.blocks[len(self._rendered) :]:
            strips = render_markdown(block.source, self.app.console, width, style)
            self.renders += 1
            if self._rendered:
                self._lines.append(Strip.blank(width, style))  # Rich's gap between blocks
            self._rendered.append(strips)
            self._lines.extend(strips)
        return self._lines


class TailLines(MarkdownLines):
    """The unstable tail, re-rendered when it changes (at most once per frame tick)."""

    def __init__(self) -> None:
        super().__init__()
        self._source = ""
        self._gap = False
        self._lines: list[Strip] | None = None
        self.paints = 0

    def set_source(self, source: str, gap: bool) -> None:
        self._source = source
        self._gap = gap and bool(source.strip())
        self._lines = None
        self.refresh(layout=True)

    def lines_for(self, width: int) -> list[Strip]:
        if self._lines is None or width != self._width:
            self._width = width
            style = self.rich_style
            source = self._source
            shown = source.strip()
            lines = render_markdown(source, self.app.console, width, style) if shown else []
            self._lines = ([Strip.blank(width, style)] if self._gap else []) + lines
            self.paints += 1
        return self._lines

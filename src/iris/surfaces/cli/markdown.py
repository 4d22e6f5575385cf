"""Terminal Markdown a line at a time: each finished line is styled once, and stays that way.

A terminal cannot unprint, so a streamed reply is formatted with a stable prefix: a finished
line is styled from its own text and the code-fence state the lines before it left, and nothing
that arrives later changes how it looks. What needs later lines to be known is left out: table
columns are not aligned (each row is drawn alone), setext headings show as written, and code is
highlighted a line at a time (a string spanning lines loses its colour after the first).
Inline spans come from markdown-it-py, so escapes, code spans and nesting follow CommonMark
rather than a regex's guess; code is coloured by Pygments.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from markdown_it import MarkdownIt
from prompt_toolkit.styles.pygments import pygments_token_to_classname
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from iris.formats.fences import Fence, closes, is_fence_line, opens

Piece = tuple[str, str]  # (prompt_toolkit style classes, text): one run of formatted text

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_QUOTE = re.compile(r"^ {0,3}>[ ]?(.*)$")
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+(.*)$")
_ORDERED = re.compile(r"^([ \t]*)(\d{1,9}[.)])[ \t]+(.*)$")
_TABLE_RULE = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)+\|?[ \t]*$")
_TABLE_ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$")
_CELL_EDGE = re.compile(r"(?<!\\)\|")  # a pipe that is not escaped

_SPAN_OPEN = {
    "strong_open": "class:md.strong",
    "em_open": "class:md.em",
    "s_open": "class:md.strike",
    "link_open": "class:md.link",
}
_SPAN_CLOSE = {"strong_close", "em_close", "s_close", "link_close"}


class MarkdownLines:
    """Styles the lines of one reply in order; ``partial`` previews the unfinished last line."""

    def __init__(self, width: int = 80) -> None:
        self._rule_width = max(3, min(width, 60))
        self._fence: Fence | None = None  # the open code block
        self._lexer: Any = None  # Pygments lexer for the open fence's language, if known
        self._md = MarkdownIt("commonmark").enable("strikethrough")

    def line(self, text: str) -> list[Piece]:
        """Style one finished line; it may open or close a code fence."""
        if self._fence is not None:
            if closes(self._fence, text):
                self._fence, self._lexer = None, None
                return [("class:md.fence", text)]
            return self._code(text)
        if fence := opens(text):
            self._fence = fence
            self._lexer = _lexer(fence.language) if fence.language else None
            return [("class:md.fence", text)]
        return self._block(text)

    def partial(self, text: str) -> list[Piece]:
        """Style the unfinished last line for a preview; the fence state does not change."""
        if self._fence is not None:
            return self._code(text)
        if is_fence_line(text):
            return [("class:md.fence", text)]
        return self._block(text)

    def _code(self, text: str) -> list[Piece]:
        if self._lexer is None:
            return [("class:md.code", text)]
        pieces = [
            (f"class:{pygments_token_to_classname(token)}", value)
            for token, value in self._lexer.get_tokens(text)
        ]
        return [(style, value.rstrip("\n")) for style, value in pieces if value.rstrip("\n")]

    def _block(self, text: str) -> list[Piece]:
        if match := _HEADING.match(text):
            return self._inline(match.group(2), "class:md.heading")
        if _RULE.match(text):
            return [("class:md.rule", "─" * self._rule_width)]
        if _TABLE_RULE.match(text):
            rule = text.strip().replace("-", "─").replace(":", "─")
            left = "├" if rule.startswith("|") else ""
            right = "┤" if rule.endswith("|") else ""
            return [("class:md.rule", left + rule.strip("|").replace("|", "┼") + right)]
        if _TABLE_ROW.match(text):
            return self._table_row(text)
        if match := _QUOTE.match(text):
            return [("class:md.quote", "▌ "), *self._inline(match.group(1), "class:md.quote")]
        if match := _BULLET.match(text):
            return [("", match.group(1)), ("class:md.bullet", "• "), *self._inline(match.group(2))]
        if match := _ORDERED.match(text):
            indent, number, rest = match.groups()
            return [("", indent), ("class:md.bullet", f"{number} "), *self._inline(rest)]
        return self._inline(text)

    def _table_row(self, text: str) -> list[Piece]:
        cells = _CELL_EDGE.split(text.strip())[1:-1]
        pieces: list[Piece] = [("class:md.rule", "│")]
        for cell in cells:
            pieces += [("", " "), *self._inline(cell.strip()), ("", " "), ("class:md.rule", "│")]
        return pieces

    def _inline(self, text: str, base: str = "") -> list[Piece]:
        if not text:
            return []
        pieces: list[Piece] = []
        stack = [base] if base else []
        href, link_start = "", 0
        for token in self._md.parseInline(text)[0].children or []:
            style = " ".join(stack)
            if token.type in _SPAN_OPEN:
                stack.append(_SPAN_OPEN[token.type])
                if token.type == "link_open":
                    href, link_start = str(token.attrs.get("href", "")), len(pieces)
            elif token.type in _SPAN_CLOSE:
                if stack and stack[-1] != base:
                    stack.pop()
                shown = "".join(piece[1] for piece in pieces[link_start:])
                if token.type == "link_close" and href and shown != href:
                    # The terminal shows no link target, so spell it out once.
                    pieces.append(("class:md.url", f" ({href})"))
                href = "" if token.type == "link_close" else href
            elif token.type == "code_inline":
                pieces.append((f"{style} class:md.code".strip(), token.content))
            elif token.type in {"softbreak", "hardbreak"}:
                pieces.append((style, " "))
            elif token.content:
                pieces.append((style, token.content))
        return pieces


@functools.cache
def _lexer(language: str) -> Any:
    try:
        return get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None

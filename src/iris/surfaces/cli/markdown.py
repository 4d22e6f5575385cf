"""Terminal Markdown a line at a time: each finished line is styled once, and stays that way.

A terminal cannot unprint, so a streamed reply is formatted with a stable prefix: a finished
line is styled from its own text and the code-fence state the lines before it left, and nothing
that arrives later changes how it looks. Constructs that need later lines to be known (tables,
setext headings) are shown as written. Inline spans come from markdown-it-py, so escapes, code
spans and nesting follow CommonMark rather than a regex's guess.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

Piece = tuple[str, str]  # (prompt_toolkit style classes, text): one run of formatted text

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_QUOTE = re.compile(r"^ {0,3}>[ ]?(.*)$")
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+(.*)$")
_ORDERED = re.compile(r"^([ \t]*)(\d{1,9}[.)])[ \t]+(.*)$")

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
        self._fence: str | None = None  # the marker of the open code fence
        self._md = MarkdownIt("commonmark").enable("strikethrough")

    def line(self, text: str) -> list[Piece]:
        """Style one finished line; it may open or close a code fence."""
        fence = _FENCE.match(text)
        if self._fence is not None:
            if fence and self._closes(fence):
                self._fence = None
                return [("class:md.fence", text)]
            return [("class:md.code", text)]
        # A backtick fence's info string cannot hold a backtick (that is inline code instead).
        if fence and not (fence.group(1)[0] == "`" and "`" in fence.group(2)):
            self._fence = fence.group(1)
            return [("class:md.fence", text)]
        return self._block(text)

    def partial(self, text: str) -> list[Piece]:
        """Style the unfinished last line for a preview; the fence state does not change."""
        if self._fence is not None:
            return [("class:md.code", text)]
        if _FENCE.match(text):
            return [("class:md.fence", text)]
        return self._block(text)

    def _closes(self, fence: re.Match[str]) -> bool:
        assert self._fence is not None
        marker = fence.group(1)
        return (
            marker[0] == self._fence[0]
            and len(marker) >= len(self._fence)
            and not fence.group(2).strip()
        )

    def _block(self, text: str) -> list[Piece]:
        if match := _HEADING.match(text):
            return self._inline(match.group(2), "class:md.heading")
        if _RULE.match(text):
            return [("class:md.rule", "─" * self._rule_width)]
        if match := _QUOTE.match(text):
            return [("class:md.quote", "▌ "), *self._inline(match.group(1), "class:md.quote")]
        if match := _BULLET.match(text):
            return [("", match.group(1)), ("class:md.bullet", "• "), *self._inline(match.group(2))]
        if match := _ORDERED.match(text):
            indent, number, rest = match.groups()
            return [("", indent), ("class:md.bullet", f"{number} "), *self._inline(rest)]
        return self._inline(text)

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

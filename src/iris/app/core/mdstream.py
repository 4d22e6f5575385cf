"""The incremental Markdown splitter: an append-only parse that re-parses only the unstable tail.

Text arrives as appended chunks. Everything before the last top-level block is *settled* — its
tokens never change again, so a renderer draws each settled block once — and only the tail is
parsed again on the next append. A block is settled only once the next block's first line is
complete: until then the parser may still fold that line into it (``2. two`` continuing the list
``1. one``), which is how Textual's own ``Markdown.append`` ends up with three lists where a
full parse has one.

Reference-style link definitions are global in Markdown; a definition that arrives after the
block using it is not applied to already settled blocks (chat replies almost never use them).
"""

from __future__ import annotations

from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from iris.app.core.breaks import HardBreaks


def make_parser() -> MarkdownIt:
    """The parser shared by the splitter and the widgets (Textual's default flavour)."""
    return MarkdownIt("gfm-like")


@dataclass(frozen=True)
class Block:
    """One settled top-level block: its source (with trailing blank lines) and tokens."""

    index: int
    source: str
    tokens: tuple[Token, ...]


class MarkdownSplitter:
    """Feeds appended text, settles stable blocks, keeps the unstable tail parsed."""

    def __init__(self, parser: MarkdownIt | None = None) -> None:
        self._parser = parser or make_parser()
        self.settled: list[Block] = []
        self.tail = ""
        self.tail_tokens: list[Token] = []
        self.parsed_chars = 0  # characters handed to the parser, for the benchmark

    @property
    def source(self) -> str:
        return "".join(block.source for block in self.settled) + self.tail

    def reset(self, text: str = "") -> list[Block]:
        """Start over (a rewrite); returns the blocks settled by seeding ``text``."""
        self.settled = []
        self.tail = ""
        self.tail_tokens = []
        return self.append(text)

    def append(self, chunk: str) -> list[Block]:
        """Append ``chunk``; returns the blocks that became settled."""
        if not chunk and self.tail_tokens:
            return []
        self.tail += chunk
        tokens = self._parse(self.tail)
        starts = [
            (i, token.map[0])
            for i, token in enumerate(tokens)
            if token.level == 0 and token.nesting >= 0 and token.map is not None
        ]
        complete_lines = self.tail.count("\n")
        # The last block whose first line is complete; every block before it is stable.
        cut = next(
            (k for k in range(len(starts) - 1, 0, -1) if starts[k][1] < complete_lines), None
        )
        if cut is None:
            self.tail_tokens = tokens
            return []
        offsets = _line_offsets(self.tail)
        new: list[Block] = []
        for k in range(cut):
            (first, line), (after, next_line) = starts[k], starts[k + 1]
            # The first block also takes any blank lines that open the tail.
            source = self.tail[offsets[line] if k else 0 : offsets[next_line]]
            new.append(Block(len(self.settled) + len(new), source, tuple(tokens[first:after])))
        self.settled.extend(new)
        cut_token, cut_line = starts[cut]
        self.tail = self.tail[offsets[cut_line] :]
        self.tail_tokens = _shift(tokens[cut_token:], -cut_line)
        return new

    def _parse(self, text: str) -> list[Token]:
        self.parsed_chars += len(text)
        return self._parser.parse(text)


def _line_offsets(text: str) -> list[int]:
    """Character offset of the start of each line (and one past the end)."""
    offsets = [0]
    at = text.find("\n")
    while at != -1:
        offsets.append(at + 1)
        at = text.find("\n", at + 1)
    offsets.append(len(text))
    return offsets


def _shift(tokens: list[Token], delta: int) -> list[Token]:
    """Move line maps so the tail's tokens count lines from the tail's start."""
    for token in tokens:
        if token.map is not None:
            token.map = [token.map[0] + delta, token.map[1] + delta]
    return tokens


@dataclass(frozen=True)
class FeedStep:
    """What one revealed prefix changed: blocks to draw once, and whether to redraw the tail."""

    settled: list[Block]
    tail_changed: bool
    reseeded: bool  # a rewrite: the drawn blocks are stale and must go


class MarkdownFeed:
    """Revealed prefixes of one bubble → hard-break transform → splitter."""

    def __init__(self, parser: MarkdownIt | None = None) -> None:
        self.splitter = MarkdownSplitter(parser)
        self._breaks = HardBreaks()
        self._text = ""

    def show(self, text: str) -> FeedStep:
        if text.startswith(self._text):
            delta = self._breaks.feed(text[len(self._text) :])
            self._text = text
            if not delta and self.splitter.tail_tokens:
                return FeedStep([], False, False)
            return FeedStep(self.splitter.append(delta), True, False)
        # A rewrite: the transform and the parse start over from the new text.
        self._breaks = HardBreaks()
        self._text = text
        return FeedStep(self.splitter.reset(self._breaks.feed(text)), True, True)

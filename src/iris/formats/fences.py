"""Fenced code blocks in Markdown, read a line at a time: which fence a line opens or closes. Pure.

One scanner for every place that must know whether text is inside code: the chat splitter
(close a block at a cut, reopen it in the next message), the hard-break transform (leave code
alone), the terminal's line styler (colour code) and the app's HTML artifact finder. It follows
CommonMark's rule for top-level fences: up to three spaces of indent, three or more backticks or
tildes; a backtick fence's info string holds no backtick (that line is inline code instead); a
block closes at a line of the same character, at least as long, with nothing after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Fence:
    """An open fenced code block: its opening line (stripped), marker character and length."""

    line: str
    char: str
    count: int
    info: str
    indent: int = 0  # spaces before the marker; as many are taken off each line of code

    @property
    def marker(self) -> str:
        """The shortest line that closes this block."""
        return self.char * self.count

    @property
    def language(self) -> str:
        """The first word of the info string (``python`` for ```` ```python title=x ````)."""
        words = self.info.split()
        return words[0] if words else ""


@dataclass(frozen=True, slots=True)
class CodeBlock:
    """A closed fenced block of a whole text: its fence and its code (each line with its ``\\n``)."""

    fence: Fence
    code: str


def _marker(line: str) -> tuple[str, int, str] | None:
    """``(char, count, rest)`` of a fence line, or None."""
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3 or len(stripped) < 3 or stripped[0] not in "`~":
        return None
    char = stripped[0]
    count = len(stripped) - len(stripped.lstrip(char))
    if count < 3:
        return None
    rest = stripped[count:]
    if char == "`" and "`" in rest:
        return None  # an inline code span, not a fence
    return char, count, rest


def is_fence_line(line: str) -> bool:
    """Whether ``line`` could open or close a fenced block."""
    return _marker(line) is not None


def opens(line: str) -> Fence | None:
    """The block ``line`` opens when read outside code, or None."""
    marker = _marker(line)
    if marker is None:
        return None
    char, count, rest = marker
    indent = len(line) - len(line.lstrip(" "))
    return Fence(line.strip(), char, count, rest.strip(), indent)


def closes(fence: Fence, line: str) -> bool:
    """Whether ``line`` closes the open ``fence``."""
    marker = _marker(line)
    if marker is None:
        return False
    char, count, rest = marker
    return char == fence.char and count >= fence.count and not rest.strip()


def after_line(fence: Fence | None, line: str) -> Fence | None:
    """The block open after one complete ``line``, given the one open before it."""
    if fence is None:
        return opens(line)
    return None if closes(fence, line) else fence


def fence_after(text: str, fence: Fence | None = None) -> Fence | None:
    """The block still open after ``text``, given the one open before it.

    Only complete lines count: a line still being written cannot open or close a fence yet."""
    for line in text.split("\n")[:-1]:
        fence = after_line(fence, line)
    return fence


def code_blocks(text: str) -> Iterator[CodeBlock]:
    """The closed fenced blocks of a whole text, in order (a block left open is not one)."""
    fence: Fence | None = None
    code: list[str] = []
    for line in text.split("\n"):
        if fence is None:
            fence, code = opens(line), []
        elif closes(fence, line):
            yield CodeBlock(fence, "".join(code))
            fence = None
        else:
            dedented = line.lstrip(" ")
            dedented = " " * max(0, len(line) - len(dedented) - fence.indent) + dedented
            code.append(dedented + "\n")

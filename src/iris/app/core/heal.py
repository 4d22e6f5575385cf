"""Heals the unfinished tail of a streaming reply for display — the rules of the browser's
``src/iris/web/js/heal.js``, on the same cases (``tests/webjs/cases/heal.json``).

An unclosed ``**bold``, ``__bold``, ``*em``, ``~~strike``, `` `code `` gets its closer, a
half-typed link shows as its text, a marker with nothing after it yet is held back, and a line of
one or two ``-`` / ``=`` under text gets a zero-width space so it is not read as a setext
underline before the next character says what it is (``- item``). Only the display copy is
healed; the text and the parse input of settled blocks are never touched.
"""

from __future__ import annotations

import re

_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# `[text](partial-url` or `[text` at the very end: show the text until the link is whole.
_OPEN_LINK = re.compile(r"(!?)\[([^\]\n]*)(?:\](?:\([^)\n]*)?)?\Z")
# A last line of one or two `-` or `=` right under a line of text (remend's rule).
_SETEXT_TAIL = re.compile(r"[^\s][^\n]*\n[ \t]*(?:-{1,2}|={1,2})[ \t]*\Z")
_ZERO_WIDTH_SPACE = "\u200b"


def _inside_open_fence(text: str) -> bool:
    opened: str | None = None
    for line in text.split("\n"):
        fence = _FENCE_LINE.match(line)
        if fence is None:
            continue
        run = fence.group(1)
        if opened is None:
            opened = run
        elif run[0] == opened[0] and len(run) >= len(opened) and not line[fence.end() :].strip():
            opened = None
    return opened is not None


def _word_char(char: str) -> bool:
    """A letter or digit (JavaScript's ``[\\p{L}\\p{N}]``)."""
    return char.isalnum()


def heal(text: str) -> str:
    """The display copy of a streaming tail."""
    if not text or _inside_open_fence(text):
        return text
    link = _OPEN_LINK.search(text)
    if link is not None:
        text = text[: link.start()] + ("" if link.group(1) else link.group(2))
    stack: list[tuple[str, int]] = []  # (marker, position)
    i, line_start = 0, True
    while i < len(text):
        char = text[i]
        if char == "\n":
            line_start, i = True, i + 1
            continue
        if line_start and char in " \t":
            i += 1
            continue
        if line_start and char in "*-+" and text[i + 1 : i + 2] in (" ", "\t"):
            line_start, i = False, i + 2  # a list bullet, not emphasis
            continue
        line_start = False
        if char == "\\":
            i += 2
            continue
        if char == "`":
            run = len(text) - i - len(text[i:].lstrip("`"))
            marker = "`" * run
            close = text.find(marker, i + run)
            if close == -1:
                stack.append((marker, i))  # the rest is code
                break
            i = close + run
            continue
        marker = _marker_at(text, i)
        if marker:
            after = text[i + len(marker) : i + len(marker) + 1]
            # An opener starts a word (`2*3` and `snake_case` are not emphasis).
            opens = not (i > 0 and _word_char(text[i - 1])) and not after.isspace()
            if stack and stack[-1][0] == marker:
                stack.pop()
            elif opens or (after == "" and len(marker) == 2):
                stack.append((marker, i))
            i += len(marker)
            continue
        i += 1
    closers = ""
    while stack:
        marker, at = stack.pop()
        if not text[at + len(marker) :].strip():
            text = text[:at]  # nothing after the marker yet: hold it back
        else:
            closers += marker
    if closers:
        text = text.rstrip(" \t")
    text += closers
    return text + _ZERO_WIDTH_SPACE if _SETEXT_TAIL.search(text) else text


def _marker_at(text: str, i: int) -> str:
    for marker in ("**", "__", "~~"):
        if text.startswith(marker, i):
            return marker
    return text[i] if text[i] in "*_" else ""

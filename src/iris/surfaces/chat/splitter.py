"""Splitting a reply into platform-sized messages: pure, no I/O.

A long reply continues in a new message at the platform's limit. Each part is a slice of the
original text (``Part.raw``; the slices re-joined equal the text) wrapped in whatever keeps it
readable on its own: a part cut inside a fenced code block closes the fence (``suffix``) and
the next part reopens it with the same info string (``prefix``). The rendered part
(``prefix + raw + suffix``) always fits the limit. ``rejoin`` is the reader: it takes the
reopened and closing fence lines off the rendered parts again.

Cuts prefer a line break, then a space, in the last half of the window; a cut never falls
before the rest of a line that a message would read as a fence line (a message starts a line:
``ab ```py`` is text, but a message starting ```` ```py ```` opens code); a cut never falls
between the two halves of a surrogate pair (Python strings hold code points, so a cut between
characters is always between whole code points; astral characters count 2 in UTF-16).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from iris.formats.fences import Fence, fence_after, is_fence_line

Unit = Literal["utf16", "chars"]


@dataclass(frozen=True, slots=True)
class Part:
    raw: str
    prefix: str = ""
    suffix: str = ""

    @property
    def text(self) -> str:
        return self.prefix + self.raw + self.suffix


def measure(text: str, unit: Unit) -> int:
    if unit == "chars":
        return len(text)
    # Telegram counts UTF-16 code units, not code points: astral characters (emoji) count 2.
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _fit(text: str, budget: int, unit: Unit) -> int:
    """The longest prefix length of ``text`` whose size is at most ``budget``."""
    budget = max(budget, 0)
    if unit == "chars" or len(text) * 2 <= budget:
        return min(len(text), budget)
    used = 0
    for i, ch in enumerate(text):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > budget:
            return i
    return len(text)


def _cut(window: str) -> int:
    """Where to cut a full window: after the last newline, else the last space, in its second half."""
    half = len(window) // 2
    newline = window.rfind("\n", half)
    if newline >= 0:
        return newline + 1
    space = window.rfind(" ", half)
    if space >= 0:
        return space + 1
    return len(window)


def _off_fence_line(rest: str, end: int) -> int:
    """Move a cut that falls inside a fence line, or before what reads as one, to the line's start.

    A fence line cut in two would neither open nor close its block where the reader sees it;
    the rest of a line that is not one (``ab ```py``) would open a block in the next message."""
    if end >= len(rest) or end <= 0 or rest[end - 1] == "\n":
        return end
    line_start = rest.rfind("\n", 0, end) + 1
    line_end = rest.find("\n", end)
    if line_end < 0:
        line_end = len(rest)
    if line_start > 0 and (
        is_fence_line(rest[line_start:line_end]) or is_fence_line(rest[end:line_end])
    ):
        return line_start
    return end


def fence_at(text: str, start: int, starts: Sequence[int] = ()) -> Fence | None:
    """The block open at ``start`` as the messages before it read it.

    ``starts`` are where messages before ``start`` began: each message starts a line of its
    own, so a message that began mid-line (a cut at a space) reads the rest of that line as a
    line, as ``rejoin`` does (``ab ```py`` is text, the ```` ```py ```` a message starts with
    opens a block). Without ``starts`` this is ``fence_after(text[:start])``."""
    fence: Fence | None = None
    begun = 0
    for cut in sorted({c for c in starts if 0 < c < start} | {start}):
        fence = fence_after(text[begun:cut], fence)
        begun = cut
    return fence


def split(
    text: str,
    limit: int,
    unit: Unit = "chars",
    *,
    start: int = 0,
    starts: Sequence[int] = (),
    going_on: bool = False,
) -> list[Part]:
    """Split ``text[start:]`` into parts whose rendered text fits ``limit``.

    ``start`` lets a continuation begin mid-reply: the fence state of ``text[:start]`` carries
    over, as the messages that began at ``starts`` read it (``fence_at``). ``going_on``: the
    reply goes on past ``text`` (a block cut from it), so a last part that ends in code closes
    its fence as every other part does. Returns ``[]`` for an empty remainder."""
    if limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    fence = fence_at(text, start, starts) if start else None
    parts: list[Part] = []
    pos = start
    while pos < len(text):
        rest = text[pos:]
        part, after = _part(rest, fence, limit, unit, going_on=going_on)
        parts.append(part)
        fence = after if len(part.raw) < len(rest) else None
        pos += len(part.raw)
    return parts


def _part(
    rest: str, fence: Fence | None, limit: int, unit: Unit, *, going_on: bool
) -> tuple[Part, Fence | None]:
    """The next part of ``rest`` (``fence``: the block open where it starts) and the block
    open after its slice."""
    prefix = fence.line + "\n" if fence else ""
    if measure(prefix, unit) * 2 > limit:
        prefix = ""  # an absurdly long info string: readability yields to fitting
    budget = limit - measure(prefix, unit)
    end = _fit(rest, budget, unit)
    if end < len(rest):
        end = _off_fence_line(rest, _cut(rest[:end]) or end)
    while True:
        raw = rest[:end]
        after = fence_after(raw, fence)
        suffix = ""
        if after is not None and (end < len(rest) or going_on):
            suffix = ("" if raw.endswith("\n") else "\n") + after.marker
        size = measure(prefix + raw + suffix, unit)
        if size <= limit or not suffix:
            break
        # Make room for the closing fence; the state at the new cut is computed again.
        shorter = _fit(raw, budget - measure(suffix, unit), unit)
        if shorter <= 0:
            suffix = ""
            break
        end = _off_fence_line(rest, _cut(raw[:shorter]) if shorter < len(raw) else shorter)
    if end <= 0:
        # Nothing fits beside the prefix: one bare character (fits any limit >= 2).
        return Part(rest[:1]), fence
    return Part(raw, prefix, suffix), after


def rejoin(texts: Sequence[str]) -> str:
    """The reply read back from its rendered parts: reopened fences and closing markers removed.

    Exact when every cut inside code fell at a line end, as cuts prefer to; a cut inside a code
    line longer than half a message reads back as a line break there (a closing marker must
    start a line of its own, so the part gave the code one)."""
    out: list[str] = []
    fence: Fence | None = None
    for n, text in enumerate(texts):
        if fence is not None and text.startswith(fence.line + "\n"):
            text = text[len(fence.line) + 1 :]
        after = fence_after(text, fence)
        if n < len(texts) - 1 and after is not None and text.endswith("\n" + after.marker):
            text = text.removesuffix(after.marker)
        out.append(text)
        fence = after
    return "".join(out)

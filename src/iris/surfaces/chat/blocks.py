"""Where a reply being written may be cut into a block, for platforms that cannot edit. Pure.

A platform without edits (WhatsApp) cannot grow one message in place; sending every delta as a
message floods the chat (Hermes sent one Signal message per chunk). Block streaming sends the
reply as paragraph-sized messages as it forms (``reply.Reply`` in ``blocks`` mode lays them
out; this module says where one may end):

- a block ends where a paragraph is complete (a blank line) or a fenced code block closed, and
  only once ``min_chars`` characters have gathered since the last block: the end is the last
  such boundary, so text that gathered while the chat's budget made the reply wait goes out as
  one block, not several;
- after ``block_idle`` seconds of silence (``idle``) whatever is complete goes: up to the last
  paragraph end, else the last line end or space (never a word cut in two: the model may not
  have finished it);
- never inside an open code fence: text from a fence that has not closed yet waits for its
  close (a block of code is readable only whole);
- text that would not fit one message anyway (``limit``) goes as soon as a message is full,
  cut as ``splitter.split`` cuts (at a line end or a space; a cut inside code closes the fence
  and the next block reopens it).

A block is a slice of the reply: the blocks joined are the reply (``splitter.rejoin`` takes the
fence lines a long code block gained off again).
"""

from __future__ import annotations

from collections.abc import Sequence

from iris.formats.fences import Fence, after_line, opens
from iris.surfaces.chat.splitter import Unit, fence_at, measure, split

# What a reply cut short by an interrupt ends with: the user sees the reply stopped there.
INTERRUPTED = " …(interrupted)"
# What starts the block that restates a reply a retry changed after blocks went out.
CORRECTION = "(correction) "


def block_end(
    text: str,
    start: int,
    min_chars: int,
    limit: int,
    unit: Unit = "chars",
    *,
    idle: bool = False,
    starts: Sequence[int] = (),
) -> int:
    """Where the next block may end in ``text`` (it starts at ``start``); ``start`` when no
    block is ready yet. ``starts``: where the blocks before began (``splitter.fence_at``)."""
    opened = fence_at(text, start, starts) if start else None
    fence = opened
    best = start  # the last boundary with enough text before it
    last = start  # the last boundary of any size
    safe = len(text)  # text from here on is in a fence still open
    content = False  # text that is not blank since the last boundary
    pos = start
    while (newline := text.find("\n", pos)) >= 0:
        line, end = text[pos:newline], newline + 1
        before: Fence | None = fence
        fence = after_line(fence, line)
        boundary = False
        if before is not None:
            boundary = fence is None  # a code block closed: complete
        elif fence is not None:
            # A fence opens: the paragraph before it is complete; the code is not yet.
            if content:
                last = pos
                if pos - start >= min_chars:
                    best = pos
            content = False
        elif not line.strip():
            boundary = content  # a blank line ends the paragraph above it
        else:
            content = True
        if boundary:
            last = end
            content = False
            if end - start >= min_chars:
                best = end
        pos = end
    if fence is not None:
        safe = _open_from(text, start, opened)
    if best == start and measure(text[start:safe], unit) > limit:
        # More than a message already: the full messages go, the rest waits.
        parts = split(text[:safe], limit, unit, start=start, starts=starts)
        best = start + sum(len(part.raw) for part in parts[:-1])
    if idle:
        best = max(best, last, _word_end(text, start, safe))
    return best if text[start:best].strip() else start


def _open_from(text: str, start: int, state: Fence | None) -> int:
    """Where the fence still open at the end of ``text`` opened (``start`` if before it);
    ``state``: the fence open at ``start``."""
    if state is not None:
        return start  # open since before this block: nothing of it is complete
    pos, opened = start, start
    while (newline := text.find("\n", pos)) >= 0:
        line = text[pos:newline]
        if state is None and opens(line) is not None:
            opened = pos
        state = after_line(state, line)
        pos = newline + 1
    return opened


def _word_end(text: str, start: int, safe: int) -> int:
    """The end of the last whole word before ``safe``: after its last line end or space."""
    region = text[start:safe]
    if safe < len(text):
        return safe  # up to the fence's opening line, which ends with its line break
    line = region.rfind("\n")
    cut = max(line, region.rfind(" "))
    if cut > line and region[cut + 1 :].lstrip(" ")[:1] in ("`", "~"):
        # The next block would start its line with what may read as a fence: cut at the
        # line's start instead (a fence is read per line, and a message starts one).
        cut = line
    return start + cut + 1 if cut >= 0 else start

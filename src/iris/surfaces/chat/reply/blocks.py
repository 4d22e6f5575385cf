"""The blocks layout, for platforms that cannot edit (or ``transport: blocks``): the reply as
paragraph-sized messages while it forms, and where one may end (``block_end``). Pure.

A platform without edits (WhatsApp) cannot grow one message in place; sending every delta as a
message floods the chat (Hermes sent one Signal message per chunk). So there is no preview:
each message is a *block* of the text, sent once, whole. A block waiting for the budget grows
to the newest boundary, so a slow chat gets fewer, larger blocks. The segment's close sends the
rest; an interrupt sends what was complete, marked (``INTERRUPTED``). A reset that takes back
text a block already showed restates it from the start of that block in a block that says so
(``CORRECTION``). Tool lines and the reasoning go out as blocks too: tool lines once
``min_block_chars`` gathered, after ``block_idle`` or at the batch's end; the reasoning before
the text it preceded.

Where a block may end (``block_end``):

- where a paragraph is complete (a blank line) or a fenced code block closed, and only once
  ``min_chars`` characters have gathered since the last block: the end is the last such
  boundary, so text that gathered while the chat's budget made the reply wait goes out as one
  block, not several;
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from iris.formats.fences import Fence, after_line, opens
from iris.formats.reasoning import with_reasoning
from iris.segments import common_prefix
from iris.surfaces.chat.reply.calls import Slot
from iris.surfaces.chat.reply.layout import Layout
from iris.surfaces.chat.splitter import Unit, fence_at, measure, split
from iris.surfaces.chat.throttle import Throttle

if TYPE_CHECKING:
    from iris.surfaces.chat.reply.plan import Reply, Segment

# What a reply cut short by an interrupt ends with: the user sees the reply stopped there.
INTERRUPTED = " …(interrupted)"
# What starts the block that restates a reply a retry changed after blocks went out.
CORRECTION = "(correction) "

Block = tuple[int, int, str]  # (start, end, text)


@dataclass
class _Cuts:
    """What the blocks layout keeps of one segment."""

    ending: str = ""  # how the segment model closed it
    sent: str = ""  # the text the landed blocks showed, from the start
    cuts: list[int] = field(default_factory=list[int])  # where each landed block started
    forced: int = 0  # a block may end here (an idle flush found it complete)
    correcting: bool = False  # the next block restates text a reset took back
    marked: bool = False  # the interrupt's mark went out
    laid_from: int = 0  # where the text not yet in a block started at the last layout


class BlocksLayout(Layout):
    cursor = ""

    def __init__(self, plan: Reply) -> None:
        super().__init__(plan, preview=False)
        self._cuts: dict[Segment, _Cuts] = {}
        # When the turn was last heard from, and whether its silence was acted on.
        self._heard = float("-inf")
        self._idle_done = True
        self._reasoning_shown = False  # a reasoning block went out

    def _of(self, seg: Segment) -> _Cuts:
        return self._cuts.setdefault(seg, _Cuts())

    # -- a segment's blocks -----------------------------------------------------------------------
    def lay_out(self, seg: Segment) -> None:
        """The segment's complete blocks as messages, each sent once, whole."""
        state = self._of(seg)
        done = self._done(seg)
        committed = self._committed(seg, done)
        text = self._text(seg)
        if not text.startswith(state.sent):
            committed, done = self._restate(seg, text), []
        state.laid_from = committed
        self._place(seg, len(done), self._blocks(seg, text, committed))

    def _restate(self, seg: Segment, text: str) -> int:
        """A reset took back text a block showed: restate from the start of that block."""
        state, slots = self._of(seg), self.plan.slots
        kept = common_prefix(state.sent, text)
        # (A replay that stopped short restates its last block: the reply ends there.)
        restart = max((c for c in state.cuts if c <= kept and c < len(text)), default=0)
        for index in seg.run:
            if slots[index].shown is None:
                slots[index].want = ""
        seg.run, seg.starts = [], []
        state.cuts = [cut for cut in state.cuts if cut < restart]
        seg.base, state.sent, state.forced = restart, text[:restart], 0
        state.correcting = True
        return restart

    def _blocks(self, seg: Segment, text: str, committed: int) -> list[Block]:
        """The blocks of ``text`` from ``committed`` on that may go now, marked."""
        state, unit = self._of(seg), self.plan.caps.length_unit
        interrupted = seg.final is not None and state.ending == "interrupted"
        limit = self.plan.limit
        if state.correcting:
            limit -= len(CORRECTION)
        if interrupted:
            limit -= len(INTERRUPTED)
        starts = self._starts(seg)  # a block that began mid-line reads it as a line
        if interrupted:
            cut = block_end(text, committed, 0, limit, unit, idle=True, starts=starts)
        elif seg.final is not None:
            cut = len(text)
        else:
            min_chars = self.plan.display.min_block_chars
            cut = block_end(text, committed, min_chars, limit, unit, starts=starts)
            if committed < state.forced <= len(text):
                cut = max(cut, state.forced)
        blocks: list[Block] = []
        end = committed
        more = cut < len(text)  # a block cut inside code (a full message) closes its fence
        if cut > committed:
            for part in split(
                text[:cut], limit, unit, start=committed, starts=starts, going_on=more
            ):
                start, end = end, end + len(part.raw)
                if part.raw.strip():  # whitespace between blocks is no message
                    blocks.append((start, end, part.text))
        if interrupted and text[committed:].strip() and not state.marked:
            if blocks:
                start, end, last = blocks[-1]
                blocks[-1] = (start, end, last.rstrip() + INTERRUPTED)
            else:
                blocks.append((committed, committed, INTERRUPTED.strip()))
        if state.correcting and blocks:
            start, end, first = blocks[0]
            blocks[0] = (start, end, CORRECTION + first)
        return blocks

    def _place(self, seg: Segment, done: int, blocks: list[Block]) -> None:
        """The blocks into the segment's messages not out yet, and new ones."""
        plan = self.plan
        waiting = seg.run[done:]
        for k, (start, end, body) in enumerate(blocks):
            if k < len(waiting):
                index = waiting[k]
                seg.starts[done + k] = start
            else:
                seg.starts.append(start)
                index = plan.add(Slot("text"), seg)
                seg.run.append(index)
            slot = plan.slots[index]
            slot.want, slot.final, slot.want_end = body, True, end
        for index in waiting[len(blocks) :]:
            slot = plan.slots[index]
            slot.want, slot.final = "", False

    def _done(self, seg: Segment) -> list[int]:
        """The segment's blocks that are out (or given up)."""
        slots = self.plan.slots
        return [i for i in seg.run if slots[i].shown is not None or slots[i].dead]

    def _starts(self, seg: Segment) -> list[int]:
        """Where the segment's blocks so far began (landed, given up or waiting)."""
        return [*self._of(seg).cuts, *seg.starts]

    def _committed(self, seg: Segment, done: list[int]) -> int:
        """Where the segment's text not yet in a block starts."""
        if not done:
            return seg.base
        slot = self.plan.slots[done[-1]]
        return slot.shown_end if slot.shown is not None else slot.want_end

    def _text(self, seg: Segment) -> str:
        """The text the segment's blocks are cut from.

        The settled text is the streamed text with its whitespace trimmed (and a failure's
        notice after it): blocks already out index the streamed text, so it stays."""
        if seg.final is None:
            return seg.text
        closed = seg.closed
        if closed is None or not seg.final.startswith(closed) or seg.text.strip() != closed.strip():
            return seg.final
        body = seg.text[: max(len(seg.text.rstrip()), len(self._of(seg).sent))]
        return body + seg.final[len(closed) :]

    def grown(self, seg: Segment, delta: str) -> bool:
        # A block ends only at a line break, or where its text fills a message.
        return "\n" in delta or len(seg.text) - self._of(seg).laid_from > self.plan.limit // 2

    def reset(self, seg: Segment) -> None:
        self._of(seg).forced = 0

    def closing(self, seg: Segment, ending: str) -> None:
        self._of(seg).ending = ending

    def landed(self, index: int) -> None:
        seg = self.plan.owner.get(index)
        if seg is None or index not in seg.run:
            return
        state, slot = self._of(seg), self.plan.slots[index]
        state.sent = self._text(seg)[: slot.shown_end]
        state.cuts.append(seg.starts[seg.run.index(index)])
        state.correcting = False
        state.marked = state.marked or (slot.shown or "").endswith(INTERRUPTED.strip())
        self.lay_out(seg)

    def lost(self, index: int) -> None:
        self.landed(index)  # a block is never edited anyway

    def abandoned(self, seg: Segment, index: int) -> None:
        self.lay_out(seg)  # the block's text is given up; the next one follows it

    # -- reasoning and tool lines -----------------------------------------------------------------
    def reasoning_before(self) -> None:
        self._flush("".join(self.plan.reasoning))

    def end_reasoning(self, seg: Segment | None, reasoning: str) -> str:
        plan = self.plan
        reasoning = "".join(plan.reasoning) or ("" if self._reasoning_shown else reasoning)
        if seg is not None and any(plan.slots[i].shown is not None for i in seg.run):
            # The answer is out already: its reasoning follows as a block of its own.
            self._flush(reasoning)
            return ""
        return reasoning

    def _flush(self, reasoning: str) -> None:
        """The reasoning so far goes out as blocks, before what follows it."""
        plan = self.plan
        if not plan.display.show_reasoning:
            return
        plan.reasoning = []
        layout = with_reasoning("", reasoning, plan.display.reasoning_style)
        if not layout.strip():
            return
        self._reasoning_shown = True
        for part in split(layout, plan.limit, plan.caps.length_unit):
            plan.add(Slot("notice", want=part.text, final=True))

    def next_batch(self, slot: Slot) -> bool:
        return slot.shown is not None  # a block went out: the lines after it are the next

    def tools_final(self, text: str) -> bool:
        return len(text) >= self.plan.display.min_block_chars

    # -- silence ----------------------------------------------------------------------------------
    def heard(self, now: float) -> None:
        self._heard, self._idle_done = now, False

    def tick(self, now: float) -> None:
        """After ``block_idle`` seconds of silence, what is complete goes."""
        plan = self.plan
        if self._idle_done or plan.ended or now < self._heard + plan.display.block_idle:
            return
        self._idle_done = True
        seg = plan.segment
        if seg is not None and seg.final is None:
            committed = self._committed(seg, self._done(seg))
            unit, starts = plan.caps.length_unit, self._starts(seg)
            self._of(seg).forced = block_end(
                seg.text, committed, 0, plan.limit, unit, idle=True, starts=starts
            )
            self.lay_out(seg)
        if plan.tools_slot is not None:
            slot = plan.slots[plan.tools_slot]
            if slot.want and slot.shown is None and not slot.dead:
                slot.final = True

    def aside_due(self, throttle: Throttle, now: float, idle: bool) -> float | None:
        super().aside_due(throttle, now, idle)
        if self._idle_done or self.plan.ended:
            return None
        return max(self._heard + self.plan.display.block_idle, now)


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
    best, last, fence = _boundaries(text, start, min_chars, opened)
    # Text from ``safe`` on is in a fence still open.
    safe = len(text) if fence is None else _open_from(text, start, opened)
    if best == start and measure(text[start:safe], unit) > limit:
        # More than a message already: the full messages go, the rest waits.
        parts = split(text[:safe], limit, unit, start=start, starts=starts)
        best = start + sum(len(part.raw) for part in parts[:-1])
    if idle:
        best = max(best, last, _word_end(text, start, safe))
    return best if text[start:best].strip() else start


def _boundaries(
    text: str, start: int, min_chars: int, fence: Fence | None
) -> tuple[int, int, Fence | None]:
    """The last boundary with ``min_chars`` before it, the last of any size, and the fence still
    open at the end of ``text`` (``fence``: the one open at ``start``)."""
    best = last = start
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
    return best, last, fence


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

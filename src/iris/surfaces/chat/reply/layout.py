"""How a reply's segments become messages, and what each mode changes of it: ``Layout``, the
base every mode's layout extends.

The base lays a segment's text over messages that grow in place (``lay_out``): the text is
split at the platform's limit, a long segment continues in a new message, a message the settled
text no longer needs shows ``…``, and a message given up on (``abandoned``) leaves its unseen
text to new messages. Each hook is a point where a mode decides otherwise (``EditLayout``,
``DraftLayout``, ``StreamLayout``, ``BlocksLayout``); the plan (``plan.Reply``) calls them and
never asks which mode it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iris.events import ToolEnded, ToolProgress, ToolStarted
from iris.segments import common_prefix
from iris.surfaces.chat.platforms.base import Task
from iris.surfaces.chat.reply.calls import Action, Delete, Draft, Edit, Slot
from iris.surfaces.chat.splitter import split
from iris.surfaces.chat.throttle import Throttle

if TYPE_CHECKING:
    from iris.surfaces.chat.reply.plan import Reply, Segment

CURSOR = " ▌"
# Shown in a message left over when the final text needs fewer messages than the preview did.
EMPTY = "…"


class Layout:
    """Messages that grow in place (``preview``) or go out once, whole, when settled."""

    cursor = CURSOR

    def __init__(self, plan: Reply, *, preview: bool) -> None:
        self.plan = plan
        self.preview = preview  # the reply grows in place; else each message goes out whole

    # -- a segment's messages -------------------------------------------------------------------
    def lay_out(self, seg: Segment) -> None:
        """Spread the segment's text over its live messages; add messages as it grows."""
        plan = self.plan
        final = seg.final is not None
        text = seg.final if seg.final is not None else seg.text
        if not final and (
            not self.preview
            or seg.held
            or not text
            or (not seg.run and seg.base == 0 and seg.deltas < plan.display.min_tokens)
        ):
            return
        if final or seg.rewound or not seg.run:
            first = 0
            start = seg.base
            if start and seg.base_text != text:
                start = min(start, common_prefix(seg.base_text, text))
            seg.rewound = False
        else:
            # While streaming, text only grows: every part but the last had a full window
            # when it was cut, so it cannot change. Re-split from the last part only, which
            # keeps a long reply linear instead of quadratic.
            first = len(seg.run) - 1
            start = seg.starts[first]
        parts = split(text, plan.limit, plan.caps.length_unit, start=start)
        end = start
        for offset, part in enumerate(parts):
            j = first + offset
            if j == len(seg.run):
                seg.starts.append(end)
                seg.run.append(plan.add(Slot("text"), seg))
            seg.starts[j] = end
            end += len(part.raw)
            last = offset == len(parts) - 1
            slot = plan.slots[seg.run[j]]
            if slot.dead:
                continue
            slot.want = part.text if final or not last else self.growing(part.text)
            slot.final = final or not last
            slot.want_end = end
        if final:
            self._settle_surplus(seg, len(parts))

    def _settle_surplus(self, seg: Segment, used: int) -> None:
        for index in seg.run[used:]:
            slot = self.plan.slots[index]
            if slot.dead:
                continue
            slot.want, slot.final = (EMPTY if slot.shown is not None else ""), True
            self.surplus(slot)

    def growing(self, text: str) -> str:
        """The preview of text still being written: with the cursor."""
        return text + self.cursor

    def grown(self, seg: Segment, delta: str) -> bool:
        """Lay the segment out again now that ``delta`` arrived?"""
        return True

    def reset(self, seg: Segment) -> None:
        """A retry took back text of ``seg``."""

    def closing(self, seg: Segment, ending: str) -> None:
        """The segment model closed ``seg`` (``ending``: how); it settles at the next item."""

    def reasoning_before(self) -> None:
        """What follows the reasoning so far begins (the reasoning shows only at the end)."""

    def end_reasoning(self, seg: Segment | None, reasoning: str) -> str:
        """The reasoning the answer ``seg`` shows at the turn's end."""
        return reasoning

    def landed(self, index: int) -> None:
        slot = self.plan.slots[index]
        if slot.final and not slot.want:
            # Its segment settled to less text while this was on its way: take the rest back.
            slot.want = EMPTY
            self.surplus(slot)

    def lost(self, index: int) -> None:
        """A send whose answer was lost: it counts as shown, and cannot be edited."""
        self.plan.abandon(index)

    def abandoned(self, seg: Segment, index: int) -> None:
        """Message ``index`` of ``seg`` is given up: its unseen text goes to new messages."""
        plan = self.plan
        slot = plan.slots[index]
        if slot.shown is None:
            # Never got through at all (the platform keeps refusing): stop here rather than
            # retrying the same text in new messages forever.
            return
        position = seg.run.index(index)
        for later in seg.run[position + 1 :]:
            plan.slots[later].dead = True
        seg.base_text = seg.final if seg.final is not None else seg.text
        seg.base = slot.shown_end
        seg.run, seg.starts = [], []
        seg.held = seg.final is None
        self.lay_out(seg)

    def surplus(self, slot: Slot) -> None:
        """A message the settled text no longer needs (it shows ``…``)."""

    # -- tool lines -----------------------------------------------------------------------------
    def tool(self, event: ToolStarted | ToolProgress | ToolEnded) -> None:
        """A tool call started, progressed or ended."""

    def tasks(self) -> tuple[Task, ...]:
        """The batch's calls as the tool message carries them."""
        return ()

    def tools_done(self) -> None:
        """The tool batch is over."""

    def next_batch(self, slot: Slot) -> bool:
        """Do the tool lines after this point start a message of their own?"""
        return False

    def tools_final(self, text: str) -> bool:
        """Does the tool message go out now, before its batch is over?"""
        return False

    # -- decisions ------------------------------------------------------------------------------
    def pending(self, slot: Slot) -> bool:
        return slot.pending

    def sends_final(self, slot: Slot) -> bool:
        """Is a new message's text its last?"""
        return slot.final

    def cleanup(self, index: int, slot: Slot, message_id: str, shown: str) -> Edit | None:
        """The one clean-up of an abandoned message at the turn's end, if any."""
        if shown.endswith(CURSOR):
            return Edit(index, message_id, shown.removesuffix(CURSOR), cleanup=True)
        slot.cleaned = True
        return None

    def heard(self, now: float) -> None:
        """The turn was heard from at ``now``."""

    def tick(self, now: float) -> None:
        """Time passed: act on what only time decides."""

    def aside(self, throttle: Throttle, now: float, idle: bool) -> Action | None:
        """A call beside the messages due now; ``idle``: no message is waiting."""
        if idle:
            throttle.withdraw()
        return None

    def aside_due(self, throttle: Throttle, now: float, idle: bool) -> float | None:
        """When a call beside the messages (or a decision by time) is due."""
        if idle:
            throttle.withdraw()
        return None

    def aside_landed(self, action: Draft | Delete) -> None: ...

    def aside_failed(self, action: Draft | Delete, throttle: Throttle, now: float) -> None: ...

    def copy_failed(
        self, slot: Slot, throttle: Throttle, now: float, *, maybe_landed: bool
    ) -> bool:
        """A fresh copy of a preview failed: True when that is all there is to do."""
        return False

    def sent(self) -> None:
        """A message went out."""

    @property
    def settled(self) -> bool:
        """Nothing beside the messages is left to do."""
        return True

    def close(self) -> None:
        """The chat takes no more messages."""

    def drafted(self, draft_id: int) -> bool:
        return False

    def without_drafts(self) -> Layout:
        """The layout to go on with where the platform refuses drafts."""
        return self

"""The messages one reply occupies in a chat, and which send or edit comes next. Pure.

``Reply`` takes the turn's events (``apply``, read through the segment model
``iris.segments``: a segment opens, grows, is reset where a retry diverged, and closes with its
final text) and the platform's answers (``landed``, ``rate_limited``, ``failed``) and says what
to do (``next_action``) and when to ask again (``due``), given the chat's ``Throttle`` and a
``now`` from the caller's clock. It never sleeps and never calls a platform;
``consumer.StreamConsumer`` does that.

A reply is a list of slots, one per platform message, in chat order: the text parts of each
segment (a long segment continues in a new message at the limit), one tool-progress message per
batch of tool calls, and a failure notice. A slot is *pending* when what it should show
(``want``) differs from what the platform shows (``shown``): unchanged text is never re-sent.

Delivery rules this module owns:

- preview: a segment's first message appears after ``min_tokens`` deltas and carries the cursor
  while it streams; the final edit carries the post-processed text without the cursor, so the
  ordinary final send never happens separately.
- flood control: a failed preview edit is retried no sooner than the throttle allows; after
  ``PREVIEW_ATTEMPTS`` failures in a row the message is abandoned, the segment stops streaming,
  and at its close the unseen remainder is sent as new messages. A final delivery is tried up
  to ``FINAL_ATTEMPTS`` times.
- a send whose answer was lost (``maybe_landed``) counts as landed but uneditable: never
  re-sent, its unseen remainder continues in a new message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, assert_never

from iris.config import ResolvedDisplay
from iris.events import (
    Event,
    ReasoningDelta,
    StreamReset,
    ToolEnded,
    ToolProgress,
    ToolStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.formats.reasoning import with_reasoning
from iris.segments import (
    Item,
    SegmentClosed,
    SegmentGrown,
    SegmentOpened,
    SegmentReset,
    Segments,
    common_prefix,
)
from iris.surfaces.chat.budget import Priority
from iris.surfaces.chat.platform import Capabilities
from iris.surfaces.chat.progress import ToolLines
from iris.surfaces.chat.splitter import measure, split
from iris.surfaces.chat.throttle import CallKind, Throttle

CURSOR = " ▌"
PREVIEW_ATTEMPTS = 3
FINAL_ATTEMPTS = 5
# Shown in a message left over when the final text needs fewer messages than the preview did.
_EMPTY = "…"


@dataclass
class Slot:
    kind: Literal["text", "tools", "notice"]
    want: str = ""
    final: bool = False  # ``want`` is settled: no cursor, must be delivered
    message_id: str | None = None
    shown: str | None = None  # what the platform shows; None until sent
    want_end: int = 0  # offset in the segment text where ``want``'s slice ends
    shown_end: int = 0  # the same for ``shown``
    failures: int = 0
    retry_at: float = float("-inf")
    dead: bool = False  # abandoned: never sent or edited again (except one cursor clean-up)
    cleaned: bool = False

    @property
    def pending(self) -> bool:
        return not self.dead and bool(self.want) and self.want != self.shown


@dataclass(frozen=True, slots=True)
class Send:
    slot: int
    text: str
    end: int = 0  # offset in the segment text where this text's slice ends


@dataclass(frozen=True, slots=True)
class Edit:
    slot: int
    message_id: str
    text: str
    end: int = 0
    cleanup: bool = False  # the one best-effort attempt to clear an abandoned cursor


Action = Send | Edit


@dataclass
class _Segment:
    run: list[int] = field(default_factory=list[int])  # live slots, from ``base`` on
    starts: list[int] = field(default_factory=list[int])  # where each run slot's slice starts
    rewound: bool = False  # the text was reset: lay it out again from the start
    text: str = ""  # streamed so far
    deltas: int = 0
    closed: str | None = None  # the final text, once the segment model closed it
    final: str | None = None  # the settled text once finalized
    base: int = 0  # where the live run starts (past an abandoned message's visible text)
    base_text: str = ""  # the text version ``base`` indexes
    held: bool = False  # stopped streaming after an abandoned message


class Reply:
    def __init__(self, caps: Capabilities, display: ResolvedDisplay, *, preview: bool) -> None:
        self.caps = caps
        self.display = display
        # Preview: the reply grows in place. Otherwise each message is sent once, whole.
        self.preview = preview and caps.can_edit
        self.limit = caps.max_length - measure(CURSOR, caps.length_unit)
        self.slots: list[Slot] = []
        self.ended = False
        self.outcome: TurnEnded | TurnFailed | None = None
        self._segment: _Segment | None = None
        self._segment_slot_of: dict[int, _Segment] = {}
        self._tools: ToolLines | None = None
        self._tools_slot: int | None = None
        self._reasoning: list[str] = []
        self._segments = Segments()
        # The text of a segment the turn's end cut short (interrupted, failed): the reply as
        # far as the user saw it, for the history when the turn's end carries none.
        self.cut_text = ""

    # -- events -------------------------------------------------------------------------------
    def apply(self, event: Event) -> None:
        for item in self._segments.feed(event):
            self._apply(item)

    def _apply(self, item: Item) -> None:
        match item:
            case TurnStarted() | StreamReset():
                pass  # a reset of the text comes as a SegmentReset, where it diverged
            case ReasoningDelta(text=text):
                self._reasoning.append(text)  # shown only at the end, if at all
            case SegmentOpened():
                self._finish_segment()  # a closed segment never grows: this is the next one
                self._open_segment()
            case SegmentGrown(delta=delta):
                seg = self._open_segment()
                seg.text += delta
                seg.deltas += 1
                self._layout(seg)
            case SegmentReset(text=text):
                seg = self._open_segment()
                seg.text = text
                seg.rewound = True
                self._layout(seg)
            case SegmentClosed(text=text, ending="commentary"):
                self._open_segment().closed = text
                self._finish_segment()
            case SegmentClosed(text=text, ending=ending):
                # Finalized at the next item: TurnEnded may still prepend the reasoning.
                self._open_segment().closed = text
                if ending in ("interrupted", "failed"):
                    self.cut_text = text
            case ToolStarted() | ToolProgress() | ToolEnded():
                self._finish_segment()
                self._tool(item)
            case TurnEnded():
                self._end(item)
            case TurnFailed():
                self._fail(item)
            case _:
                assert_never(item)

    def _open_segment(self) -> _Segment:
        if self._segment is None:
            self._finish_tools()
            self._segment = _Segment()
        return self._segment

    def _finish_segment(self, text: str | None = None) -> None:
        seg = self._segment
        if seg is None:
            return
        self._segment = None
        final = text if text is not None else seg.closed if seg.closed is not None else seg.text
        seg.final = final
        self._layout(seg)

    def _layout(self, seg: _Segment) -> None:
        """Spread the segment's text over its live messages; add messages as it grows."""
        final = seg.final is not None
        text = seg.final if seg.final is not None else seg.text
        if not final and (
            not self.preview
            or seg.held
            or not text
            or (not seg.run and seg.base == 0 and seg.deltas < self.display.min_tokens)
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
        parts = split(text, self.limit, self.caps.length_unit, start=start)
        end = start
        for offset, part in enumerate(parts):
            j = first + offset
            if j == len(seg.run):
                seg.run.append(len(self.slots))
                seg.starts.append(end)
                self.slots.append(Slot("text"))
                self._segment_slot_of[seg.run[j]] = seg
            seg.starts[j] = end
            end += len(part.raw)
            last = offset == len(parts) - 1
            slot = self.slots[seg.run[j]]
            if slot.dead:
                continue
            slot.want = part.text if final or not last else part.text + CURSOR
            slot.final = final or not last
            slot.want_end = end
        if final:
            for index in seg.run[len(parts) :]:
                slot = self.slots[index]
                slot.want, slot.final = (_EMPTY if slot.shown is not None else ""), True

    def _tool(self, event: ToolStarted | ToolProgress | ToolEnded) -> None:
        if self._tools is None:
            self._tools = ToolLines(self.display.tool_progress)
        if not self._tools.apply(event):
            return
        if self._tools_slot is None or self.slots[self._tools_slot].dead:
            if self._tools_slot is not None:
                # The abandoned message keeps its lines; the new one starts after them.
                self._tools.lines = self._tools.lines[-1:]
            self._tools_slot = len(self.slots)
            self.slots.append(Slot("tools"))
        slot = self.slots[self._tools_slot]
        text = self._tools.text()
        if measure(text, self.caps.length_unit) > self.caps.max_length:
            # Keep the newest lines: the tail says what is happening now.
            while (
                len(self._tools.lines) > 1
                and measure(self._tools.text(), self.caps.length_unit) > self.caps.max_length - 2
            ):
                self._tools.lines.pop(0)
            text = "…\n" + self._tools.text()
            text = split(text, self.caps.max_length, self.caps.length_unit)[0].text
        slot.want = text
        # Without preview a tool message goes out once, when its batch is over.
        slot.final = False

    def _finish_tools(self) -> None:
        if self._tools_slot is not None:
            self.slots[self._tools_slot].final = True
        self._tools = None
        self._tools_slot = None

    def _end(self, event: TurnEnded) -> None:
        seg = self._segment  # the answer the segment model closed just before, if any
        text = (seg.closed or "") if seg is not None else ""
        answer = text
        if self.display.show_reasoning:
            reasoning = event.reasoning or "".join(self._reasoning)
            answer = with_reasoning(text, reasoning, self.display.reasoning_style)
        if seg is None and answer:
            # No segment carries the answer (the reasoning alone): it becomes its own message.
            seg = self._open_segment()
        if seg is not None:
            self._finish_segment(answer if answer else None)
        self._finish_tools()
        self.ended, self.outcome = True, event

    def _fail(self, event: TurnFailed) -> None:
        notice = f"⚠️ {event.message}" if event.message else "⚠️ The reply failed."
        seg = self._segment  # the partial text the segment model closed just before, if any
        if seg is not None and seg.closed:
            self._finish_segment(f"{seg.closed}\n\n{notice}")
        else:
            self._finish_segment()
            self._finish_tools()
            self.slots.append(Slot("notice", want=notice, final=True))
        self._finish_tools()
        self.ended, self.outcome = True, event

    # -- decisions ----------------------------------------------------------------------------
    def _sendable(self, slot: Slot) -> bool:
        # Without preview only settled text goes out, once.
        return slot.pending and (self.preview or (slot.final and slot.shown is None))

    def _next(self) -> tuple[int, Action] | None:
        for index, slot in enumerate(self.slots):
            if self._sendable(slot):
                if slot.message_id is None:
                    return index, Send(index, slot.want, slot.want_end)
                return index, Edit(index, slot.message_id, slot.want, slot.want_end)
            if slot.shown is None and not slot.dead and slot.want:
                return None  # an earlier message is not out yet: keep the chat's order
        if self.ended:
            for index, slot in enumerate(self.slots):
                if slot.dead and not slot.cleaned and slot.message_id and slot.shown:
                    if slot.shown.endswith(CURSOR):
                        text = slot.shown.removesuffix(CURSOR)
                        return index, Edit(index, slot.message_id, text, cleanup=True)
                    slot.cleaned = True
        return None

    def next_action(self, throttle: Throttle, now: float) -> Action | None:
        found = self._next()
        if found is None:
            throttle.withdraw()
            return None
        index, action = found
        kind = "send" if isinstance(action, Send) else "edit"
        if self._ready_at(throttle, index, kind, now) > now:
            return None
        throttle.spend(kind, now)
        return action

    def due(self, throttle: Throttle, now: float) -> float | None:
        """When ``next_action`` may return something; None while nothing is pending."""
        found = self._next()
        if found is None:
            throttle.withdraw()
            return None
        index, action = found
        kind = "send" if isinstance(action, Send) else "edit"
        return self._ready_at(throttle, index, kind, now)

    def _ready_at(self, throttle: Throttle, index: int, kind: CallKind, now: float) -> float:
        slot = self.slots[index]
        if slot.retry_at > now:
            throttle.withdraw()  # not waiting on the budget until then
            return slot.retry_at
        return throttle.ready_at(kind, now, self._priority())

    def _priority(self) -> Priority:
        """Where this reply's next call stands in the bot's shared line."""
        if self.ended:
            return "final"  # the turn is over: what is left is the final delivery
        if all(slot.shown is None for slot in self.slots):
            return "first"  # the chat sees nothing of its reply yet
        return "preview"

    @property
    def settled(self) -> bool:
        return self.ended and self._next() is None

    # -- results ------------------------------------------------------------------------------
    def landed(self, action: Action, throttle: Throttle, message_id: str | None = None) -> None:
        throttle.succeeded()
        slot = self.slots[action.slot]
        if isinstance(action, Edit) and action.cleanup:
            slot.cleaned = True
            return
        slot.shown, slot.shown_end = action.text, action.end
        if slot.final and not slot.want:
            # Its segment settled to less text while this was on its way: take the rest back.
            slot.want = _EMPTY
        slot.failures = 0
        if message_id:
            slot.message_id = message_id

    def rate_limited(
        self, action: Action, throttle: Throttle, retry_after: float, now: float
    ) -> None:
        throttle.rate_limited(retry_after, now)
        self._failed(action, now, throttle)

    def failed(self, action: Action, throttle: Throttle, now: float, *, maybe_landed: bool) -> None:
        slot = self.slots[action.slot]
        if maybe_landed and isinstance(action, Send):
            # It may be in the chat: never send it again, and it cannot be edited.
            slot.shown, slot.shown_end = action.text, action.end
            self._abandon(action.slot)
            return
        self._failed(action, now, throttle)

    def _failed(self, action: Action, now: float, throttle: Throttle) -> None:
        slot = self.slots[action.slot]
        if isinstance(action, Edit) and action.cleanup:
            slot.cleaned = True
            return
        slot.failures += 1
        slot.retry_at = now + throttle.interval
        attempts = FINAL_ATTEMPTS if slot.final else PREVIEW_ATTEMPTS
        if slot.failures >= attempts:
            self._abandon(action.slot)

    def _abandon(self, index: int) -> None:
        """Stop touching this message; its segment's unseen text goes to new messages."""
        slot = self.slots[index]
        slot.dead = True
        seg = self._segment_slot_of.get(index)
        if slot.kind == "tools" or seg is None or index not in seg.run:
            return
        if slot.shown is None:
            # Never got through at all (the platform keeps refusing): stop here rather than
            # retrying the same text in new messages forever.
            return
        position = seg.run.index(index)
        for later in seg.run[position + 1 :]:
            self.slots[later].dead = True
        seg.base_text = seg.final if seg.final is not None else seg.text
        seg.base = slot.shown_end
        seg.run, seg.starts = [], []
        seg.held = seg.final is None
        self._layout(seg)

"""The messages one reply occupies in a chat, and which call comes next: ``Reply``. Pure.

``Reply`` takes the turn's events (``apply``, read through the segment model
``iris.segments``: a segment opens, grows, is reset where a retry diverged, and closes with its
final text) and the platform's answers (``landed``, ``rate_limited``, ``failed``) and says what
to do (``next_action``) and when to ask again (``due``), given the chat's ``Throttle`` and a
``now`` from the caller's clock. It never sleeps and never calls a platform;
``consumer.StreamConsumer`` does that. How the text becomes messages is the layout's
(``layout.Layout``), one per mode, chosen once when the reply is made (``layout_for``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, assert_never

from iris.config import ResolvedDisplay
from iris.events import (
    ApprovalRequested,
    ApprovalResolved,
    Event,
    ReasoningDelta,
    StreamReset,
    ToolCallDelta,
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
)
from iris.surfaces.chat.budget import Draws, Priority
from iris.surfaces.chat.platforms.base import Capabilities
from iris.surfaces.chat.progress import ToolLines
from iris.surfaces.chat.reply.blocks import BlocksLayout
from iris.surfaces.chat.reply.calls import (
    FINAL_ATTEMPTS,
    PREVIEW_ATTEMPTS,
    Action,
    Delete,
    Draft,
    Edit,
    Send,
    Slot,
    plain_draws,
    waiting,
)
from iris.surfaces.chat.reply.draft import DraftLayout
from iris.surfaces.chat.reply.edit import EditLayout
from iris.surfaces.chat.reply.layout import Layout
from iris.surfaces.chat.reply.stream import StreamLayout
from iris.surfaces.chat.splitter import measure, split
from iris.surfaces.chat.throttle import CallKind, Throttle

Mode = Literal["edit", "draft", "stream", "blocks"]


@dataclass(eq=False)  # one segment, one identity: a layout may key its own state by it
class Segment:
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


def layout_for(
    plan: Reply, mode: Mode, *, preview: bool, fresh_after: float, deletes: bool
) -> Layout:
    """The one layout of ``mode`` for this reply (``preview``: the reply may stream)."""
    match mode:
        case "edit":
            preview = preview and plan.caps.can_edit
            return EditLayout(
                plan, preview=preview, fresh_after=fresh_after if preview else 0.0, deletes=deletes
            )
        case "draft":
            return DraftLayout(plan, drafts=preview)
        case "stream":
            return StreamLayout(plan, preview=preview and plan.caps.can_edit)
        case "blocks":
            return BlocksLayout(plan)
        case _:
            assert_never(mode)


class Reply:
    def __init__(
        self,
        caps: Capabilities,
        display: ResolvedDisplay,
        *,
        preview: bool,
        mode: Mode = "edit",
        fresh_after: float = 0.0,
        deletes: bool = False,
        draws: Callable[[Send | Edit], Draws] = plain_draws,
        first_draft: int = 1,
    ) -> None:
        self.caps = caps
        self.display = display
        self._draws = draws
        # Draft ids go on from the chat's previous reply, so a stop button pressed on an older
        # reply's draft is not taken for this one's; every message sent starts the next one.
        self.first_draft = self.draft_id = first_draft
        self.slots: list[Slot] = []
        self.owner: dict[int, Segment] = {}  # the segment each text slot belongs to
        self.segment: Segment | None = None  # the segment being written
        self.tools_slot: int | None = None  # the message of the tool batch running
        self.reasoning: list[str] = []  # the reasoning so far, not shown yet
        self.ended = False
        self.outcome: TurnEnded | TurnFailed | None = None
        self.answer: Segment | None = None  # the segment that carried the final answer
        self._tools: ToolLines | None = None
        self._segments = Segments()
        # The text of a segment the turn's end cut short (interrupted, failed): the reply as
        # far as the user saw it, for the history when the turn's end carries none.
        self.cut_text = ""
        self._closed = False  # the chat takes no more messages (``close``)
        self.layout = layout_for(
            self, mode, preview=preview, fresh_after=fresh_after, deletes=deletes
        )
        self.limit = caps.max_length - measure(self.layout.cursor, caps.length_unit)

    def add(self, slot: Slot, seg: Segment | None = None) -> int:
        """A new message at the end of the reply (of ``seg``'s text); its index."""
        index = len(self.slots)
        self.slots.append(slot)
        if seg is not None:
            self.owner[index] = seg
        return index

    # -- events -------------------------------------------------------------------------------
    def apply(self, event: Event, now: float | None = None) -> None:
        """Take one event of the turn (``now``: when it came, for ``block_idle``)."""
        if now is not None:
            self.layout.heard(now)
        for item in self._segments.feed(event):
            self._apply(item)

    def _apply(self, item: Item) -> None:
        match item:
            case TurnStarted() | StreamReset() | ToolCallDelta():
                # A reset of the text comes as a SegmentReset, where it diverged; client-defined
                # tools are an API matter: a chat offers none.
                pass
            case ApprovalRequested() | ApprovalResolved():
                pass  # the platform's approval prompt is its own message, not the reply's
            case ReasoningDelta(text=text):
                self.reasoning.append(text)  # shown only at the end, if at all
            case SegmentOpened() | SegmentGrown() | SegmentReset() | SegmentClosed():
                self._text(item)
            case ToolStarted() | ToolProgress() | ToolEnded():
                self._finish_segment()
                if isinstance(item, ToolStarted):
                    self.layout.reasoning_before()
                self._tool(item)
            case TurnEnded():
                self._end(item)
            case TurnFailed():
                self._fail(item)
            case _:
                assert_never(item)

    def _text(self, item: SegmentOpened | SegmentGrown | SegmentReset | SegmentClosed) -> None:
        match item:
            case SegmentOpened():
                self._finish_segment()  # a closed segment never grows: this is the next one
                self.layout.reasoning_before()
                self._open_segment()
            case SegmentGrown(delta=delta):
                seg = self._open_segment()
                seg.text += delta
                seg.deltas += 1
                if self.layout.grown(seg, delta):
                    self.layout.lay_out(seg)
            case SegmentReset(text=text):
                seg = self._open_segment()
                seg.text = text
                seg.rewound = True
                self.layout.reset(seg)
                self.layout.lay_out(seg)
            case SegmentClosed(text=text, ending="commentary"):
                self._open_segment().closed = text
                self._finish_segment()
            case SegmentClosed(text=text, ending=ending):
                # Finalized at the next item: TurnEnded may still prepend the reasoning.
                seg = self._open_segment()
                seg.closed = text
                self.layout.closing(seg, ending)
                if ending in ("interrupted", "failed"):
                    self.cut_text = text

    def _open_segment(self) -> Segment:
        if self.segment is None:
            self._finish_tools()
            self.segment = Segment()
        return self.segment

    def _finish_segment(self, text: str | None = None) -> None:
        seg = self.segment
        if seg is None:
            return
        self.segment = None
        final = text if text is not None else seg.closed if seg.closed is not None else seg.text
        seg.final = final
        self.layout.lay_out(seg)

    def _tool(self, event: ToolStarted | ToolProgress | ToolEnded) -> None:
        if self._tools is None:
            self._tools = ToolLines(self.display.tool_progress)
        if self.tools_slot is not None and self.layout.next_batch(self.slots[self.tools_slot]):
            self._tools.lines, self.tools_slot = [], None
        self.layout.tool(event)
        if not self._tools.apply(event):
            return
        if self.tools_slot is None or self.slots[self.tools_slot].dead:
            if self.tools_slot is not None:
                # The abandoned message keeps its lines; the new one starts after them.
                self._tools.lines = self._tools.lines[-1:]
            self.tools_slot = self.add(Slot("tools"))
        slot = self.slots[self.tools_slot]
        slot.want = self._tool_text(self._tools)
        slot.tasks = self.layout.tasks()
        # Without preview a tool message goes out once, when its batch is over, unless the
        # layout sends it sooner.
        slot.final = self.layout.tools_final(slot.want)

    def _tool_text(self, tools: ToolLines) -> str:
        text = tools.text()
        unit, most = self.caps.length_unit, self.caps.max_length
        if measure(text, unit) <= most:
            return text
        # Keep the newest lines: the tail says what is happening now.
        while len(tools.lines) > 1 and measure(tools.text(), unit) > most - 2:
            tools.lines.pop(0)
        return split("…\n" + tools.text(), most, unit)[0].text

    def _finish_tools(self) -> None:
        if self.tools_slot is not None:
            self.slots[self.tools_slot].final = True
        self._tools = None
        self.tools_slot = None
        self.layout.tools_done()

    def _end(self, event: TurnEnded) -> None:
        seg = self.segment  # the answer the segment model closed just before, if any
        text = (seg.closed or "") if seg is not None else ""
        answer = text
        if self.display.show_reasoning:
            reasoning = event.reasoning or "".join(self.reasoning)
            reasoning = self.layout.end_reasoning(seg, reasoning)
            answer = with_reasoning(text, reasoning, self.display.reasoning_style)
        if seg is None and answer:
            # No segment carries the answer (the reasoning alone): it becomes its own message.
            seg = self._open_segment()
        if seg is not None:
            self._finish_segment(answer if answer else None)
        self.answer = seg
        self._finish_tools()
        self.ended, self.outcome = True, event

    def _fail(self, event: TurnFailed) -> None:
        notice = f"⚠️ {event.message}" if event.message else "⚠️ The reply failed."
        seg = self.segment  # the partial text the segment model closed just before, if any
        if seg is not None and seg.closed:
            self._finish_segment(f"{seg.closed}\n\n{notice}")
        else:
            self._finish_segment()
            self._finish_tools()
            self.add(Slot("notice", want=notice, final=True))
        self._finish_tools()
        self.ended, self.outcome = True, event

    # -- decisions ----------------------------------------------------------------------------
    def _sendable(self, slot: Slot) -> bool:
        # Without preview only settled text goes out, once.
        return self.layout.pending(slot) and (
            self.layout.preview or (slot.final and slot.shown is None)
        )

    def _next(self) -> tuple[int, Send | Edit] | None:
        if self._closed:
            return None
        for index, slot in enumerate(self.slots):
            if self._sendable(slot):
                if slot.message_id is None:
                    final = self.layout.sends_final(slot)
                    return index, Send(index, slot.want, slot.want_end, final, slot.tasks)
                return index, Edit(
                    index,
                    slot.message_id,
                    slot.want,
                    slot.want_end,
                    final=slot.final,
                    tasks=slot.tasks,
                )
            if slot.shown is None and not slot.dead and slot.want:
                return None  # an earlier message is not out yet: keep the chat's order
        if self.ended:
            for index, slot in enumerate(self.slots):
                if slot.dead and not slot.cleaned and slot.message_id and slot.shown:
                    edit = self.layout.cleanup(index, slot, slot.message_id, slot.shown)
                    if edit is not None:
                        return index, edit
        return None

    def next_action(self, throttle: Throttle, now: float) -> Action | None:
        self.layout.tick(now)
        found = self._next()
        if found is not None:
            index, action = found
            kind = "send" if isinstance(action, Send) else "edit"
            draws = self._draws(action)
            if self._ready_at(throttle, index, kind, draws, now) <= now:
                throttle.spend(kind, now, draws)
                return action
        return self.layout.aside(throttle, now, found is None)

    def due(self, throttle: Throttle, now: float) -> float | None:
        """When ``next_action`` may return something; None while nothing is pending."""
        times: list[float] = []
        found = self._next()
        if found is not None:
            index, action = found
            kind = "send" if isinstance(action, Send) else "edit"
            times.append(self._ready_at(throttle, index, kind, self._draws(action), now))
        aside = self.layout.aside_due(throttle, now, found is None)
        if aside is not None:
            times.append(aside)
        return min(times) if times else None

    def _ready_at(
        self, throttle: Throttle, index: int, kind: CallKind, draws: Draws, now: float
    ) -> float:
        slot = self.slots[index]
        if slot.retry_at > now:
            throttle.withdraw()  # not waiting on the budget until then
            return slot.retry_at
        early = waiting(slot.want, slot.shown) >= self.display.buffer_threshold
        return throttle.ready_at(kind, now, self._priority(), draws, early=early)

    def _priority(self) -> Priority:
        """Where this reply's next call stands in the bot's shared line."""
        if self.ended:
            return "final"  # the turn is over: what is left is the final delivery
        if all(slot.shown is None for slot in self.slots):
            return "first"  # the chat sees nothing of its reply yet
        return "preview"

    @property
    def settled(self) -> bool:
        return self.ended and self._next() is None and self.layout.settled

    # -- drafts -------------------------------------------------------------------------------
    def drafted(self, draft_id: int) -> bool:
        """Is ``draft_id`` one of this reply's drafts (shown now or earlier)?"""
        return self.layout.drafted(draft_id)

    @property
    def next_draft(self) -> int:
        """The first draft id the chat's next reply may use (never one of this reply's)."""
        return self.draft_id + 1

    def drafts_refused(self) -> None:
        """The platform will not show drafts here: the reply goes on by edits."""
        layout = self.layout.without_drafts()
        if layout is self.layout:
            return
        self.layout = layout
        if self.segment is not None:
            layout.lay_out(self.segment)

    # -- results ------------------------------------------------------------------------------
    def landed(self, action: Action, throttle: Throttle, message_id: str | None = None) -> None:
        throttle.succeeded()
        if isinstance(action, Draft | Delete):
            self.layout.aside_landed(action)
            return
        if isinstance(action, Send):
            self.draft_id += 1  # a message clears the chat's draft: the next one starts afresh
            self.layout.sent()
        slot = self.slots[action.slot]
        slot.sealed = slot.sealed or action.final
        if isinstance(action, Edit) and action.cleanup:
            slot.cleaned = True
            return
        slot.shown, slot.shown_end = action.text, action.end
        slot.shown_tasks = action.tasks
        if isinstance(action, Send):
            # Spent just before the call went out: the time it became visible, near enough.
            slot.sent_at = throttle.last_update
        slot.failures = 0
        if message_id:
            slot.message_id = message_id
        self.layout.landed(action.slot)

    def rate_limited(
        self, action: Action, throttle: Throttle, retry_after: float, now: float
    ) -> None:
        throttle.rate_limited(retry_after, now)
        if isinstance(action, Draft | Delete):
            self.layout.aside_failed(action, throttle, now)
            return
        slot = self.slots[action.slot]
        if isinstance(action, Send) and self.layout.copy_failed(
            slot, throttle, now, maybe_landed=False
        ):
            return
        self._failed(action, now, throttle)

    def failed(self, action: Action, throttle: Throttle, now: float, *, maybe_landed: bool) -> None:
        if isinstance(action, Draft | Delete):
            self.layout.aside_failed(action, throttle, now)
            return
        slot = self.slots[action.slot]
        if isinstance(action, Send) and self.layout.copy_failed(
            slot, throttle, now, maybe_landed=maybe_landed
        ):
            return
        if maybe_landed and isinstance(action, Send):
            # It may be in the chat: never send it again, and it cannot be edited.
            slot.shown, slot.shown_end = action.text, action.end
            self.layout.lost(action.slot)
            return
        self._failed(action, now, throttle)

    def _failed(self, action: Send | Edit, now: float, throttle: Throttle) -> None:
        slot = self.slots[action.slot]
        if isinstance(action, Edit) and action.cleanup:
            slot.cleaned = True
            return
        slot.failures += 1
        slot.retry_at = now + throttle.interval
        attempts = FINAL_ATTEMPTS if slot.final else PREVIEW_ATTEMPTS
        if slot.failures >= attempts:
            self.abandon(action.slot)

    def abandon(self, index: int) -> None:
        """Stop touching this message; its segment's unseen text goes to new messages."""
        slot = self.slots[index]
        slot.dead = True
        seg = self.owner.get(index)
        if slot.kind == "tools" or seg is None or index not in seg.run:
            return
        self.layout.abandoned(seg, index)

    def close(self) -> None:
        """The chat takes no more messages now (WhatsApp outside its 24-hour window): what is
        not out stays unsent, and nothing more is tried for this reply."""
        self._closed = True
        self.layout.close()

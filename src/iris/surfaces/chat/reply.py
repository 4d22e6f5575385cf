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
  ordinary final send never happens separately. An edit waits ``edit_interval`` after the
  last visible update, or goes as soon as ``buffer_threshold`` new characters wait; either way
  no sooner than the chat's and the bot's budgets allow (and a draft no faster than the chat's
  budget paces messages, though drafts draw on none).
- flood control: a failed preview edit is retried no sooner than the throttle allows; after
  ``PREVIEW_ATTEMPTS`` failures in a row the message is abandoned, the segment stops streaming,
  and at its close the unseen remainder is sent as new messages. A final delivery is tried up
  to ``FINAL_ATTEMPTS`` times.
- a send whose answer was lost (``maybe_landed``) counts as landed but uneditable: never
  re-sent, its unseen remainder continues in a new message.

Native transports are a ``mode`` of the same plan; the consumer's transport turns the actions
into the platform's calls:

- ``edit``: the above.
- ``draft`` (Telegram private chats): messages are sent once, whole, when settled (as without
  preview); while the turn runs, ``Draft`` actions show the text being written (or the tool
  lines, or "Thinking…" as an empty draft) at the edit interval, re-sent every
  ``DRAFT_REFRESH`` seconds so the platform's 30-second draft never lapses. Drafts are not
  messages: they never touch the chat's send budget, and a lost one costs nothing.
- fresh final (``fresh_after`` > 0, edit mode, a platform that deletes): when the turn ends
  and the answer's preview has been visible ``fresh_after`` seconds or more, the answer's
  messages are sent anew (an edit does not notify; a new message does) and each preview is
  deleted once its replacement landed (``Delete``). A replacement that fails outright turns
  back into the ordinary final edit of the preview.
- ``deletes`` (edit mode, a platform that deletes): a message the settled text no longer needs
  is deleted instead of showing ``…``.
- ``stream`` (Slack streams): as ``edit`` without a cursor, and every message is *sealed*: its
  last action carries ``final`` even when the text did not change, so the transport can end
  the stream. A tool batch carries its calls as ``Task``s for a native timeline.
- ``blocks`` (platforms that cannot edit, or ``transport: blocks``): no preview; each message is
  a *block* of the text (``blocks.block_end`` says where one may end: a paragraph or a closed
  code fence once ``min_block_chars`` gathered, whatever is complete after ``block_idle``
  seconds of silence), sent once, whole. A block waiting for the budget grows to the newest
  boundary, so a slow chat gets fewer, larger blocks. The segment's close sends the rest; an
  interrupt sends what was complete, marked (``blocks.INTERRUPTED``). A reset that takes back
  text a block already showed restates it from the start of that block in a block that says
  so (``blocks.CORRECTION``). Tool lines and the reasoning layout go out as blocks too: tool
  lines once ``min_block_chars`` gathered, after ``block_idle`` or at the batch's end; the
  reasoning before the text it preceded.

Which of the bot's shared budgets an action waits for depends on the calls it becomes, which
only the transport knows (a Slack stream's edit is an append, or, once the stream was left, a
``chat.update``): ``draws`` (the transport's, a pure look at its state) names them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, assert_never

from iris.config import ResolvedDisplay
from iris.events import (
    ApprovalRequested,
    ApprovalResolved,
    ElicitationRequested,
    ElicitationResolved,
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
from iris.formats.tool_summary import summarize
from iris.segments import (
    Item,
    SegmentClosed,
    SegmentGrown,
    SegmentOpened,
    SegmentReset,
    Segments,
    common_prefix,
)
from iris.surfaces.chat.blocks import CORRECTION, INTERRUPTED, block_end
from iris.surfaces.chat.budget import Draws, Priority
from iris.surfaces.chat.platforms.base import Capabilities, Task
from iris.surfaces.chat.progress import ToolLines
from iris.surfaces.chat.splitter import measure, split
from iris.surfaces.chat.throttle import CallKind, Throttle

CURSOR = " ▌"
PREVIEW_ATTEMPTS = 3
FINAL_ATTEMPTS = 5
# Shown in a message left over when the final text needs fewer messages than the preview did.
_EMPTY = "…"
# A Telegram draft lives 30 s after its last update: refresh it well before.
DRAFT_REFRESH = 20.0
Mode = Literal["edit", "draft", "stream", "blocks"]
_DELETE: Draws = ("delete",)


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
    sealed: bool = False  # the platform has it as final (stream mode ends its stream there)
    sent_at: float = float("-inf")  # when its first text went out (fresh final)
    replaces: tuple[str, str] | None = None  # (message id, text) of the preview it replaces
    tasks: tuple[Task, ...] = ()  # a tool batch's calls (stream mode)
    shown_tasks: tuple[Task, ...] = ()

    @property
    def pending(self) -> bool:
        return not self.dead and bool(self.want) and self.want != self.shown


@dataclass(frozen=True, slots=True)
class Send:
    slot: int
    text: str
    end: int = 0  # offset in the segment text where this text's slice ends
    final: bool = False  # the message's last text: nothing follows it
    tasks: tuple[Task, ...] = ()


@dataclass(frozen=True, slots=True)
class Edit:
    slot: int
    message_id: str
    text: str
    end: int = 0
    cleanup: bool = False  # the one best-effort attempt to clear an abandoned cursor
    final: bool = False
    tasks: tuple[Task, ...] = ()


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete a preview whose text was sent anew (fresh final)."""

    message_id: str


@dataclass
class _Deletion:
    message_id: str
    failures: int = 0
    retry_at: float = float("-inf")


@dataclass(frozen=True, slots=True)
class Draft:
    """Show ``text`` as the chat's draft ``draft_id`` (empty: "Thinking…")."""

    draft_id: int
    text: str


Action = Send | Edit | Draft | Delete


def _waiting(want: str, shown: str | None) -> int:
    """How many more characters ``want`` has than the platform shows (``buffer_threshold``).

    A preview only grows while it streams, so the difference in length is the new text,
    counted without comparing the two (this runs on every delta)."""
    return 0 if shown is None else len(want) - len(shown)


def plain_draws(action: Send | Edit) -> Draws:
    """The calls of an edit transport: a send is a new message, an edit an edit."""
    return ("send",) if isinstance(action, Send) else ("edit",)


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
    # Blocks mode:
    ending: str = ""  # how the segment model closed it
    sent: str = ""  # the text the landed blocks showed, from the start
    cuts: list[int] = field(default_factory=list[int])  # where each landed block started
    forced: int = 0  # a block may end here (an idle flush found it complete)
    correcting: bool = False  # the next block restates text a reset took back
    marked: bool = False  # the interrupt's mark went out
    laid_from: int = 0  # where the text not yet in a block started at the last layout


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
        self._draws = draws
        self.display = display
        self.mode: Mode = mode
        # Drafts preview the reply; the messages themselves are sent once, whole.
        self.drafts = preview and mode == "draft"
        # Preview: the reply grows in place. Otherwise each message is sent once, whole.
        self.preview = preview and caps.can_edit and not self.drafts and mode != "blocks"
        self.cursor = "" if mode in ("stream", "blocks") else CURSOR
        self.limit = caps.max_length - measure(self.cursor, caps.length_unit)
        # Draft ids go on from the chat's previous reply, so a stop button pressed on an older
        # reply's draft is not taken for this one's.
        self._first_draft = self._draft_id = first_draft
        self._draft_shown: str | None = None
        self._draft_at = float("-inf")
        self._tasks: dict[str, Task] = {}
        self.fresh_after = fresh_after if mode == "edit" and self.preview else 0.0
        self.deletes = deletes and mode == "edit"  # the platform deletes messages
        self._answer: _Segment | None = None  # the segment that carried the final answer
        self._fresh_checked = False
        self._deletes: list[_Deletion] = []
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
        # Blocks mode: when the turn was last heard from, and whether its silence was acted on.
        self._heard = float("-inf")
        self._idle_done = True
        self._reasoning_shown = False  # a reasoning block went out
        self._closed = False  # the chat takes no more messages (``close``)

    # -- events -------------------------------------------------------------------------------
    def apply(self, event: Event, now: float | None = None) -> None:
        """Take one event of the turn (``now``: when it came, for ``block_idle``)."""
        if now is not None:
            self._heard, self._idle_done = now, False
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
                self._flush_reasoning()
                self._open_segment()
            case SegmentGrown(delta=delta):
                seg = self._open_segment()
                seg.text += delta
                seg.deltas += 1
                # Blocks: a block ends only at a line break, or where its text fills a message.
                short = len(seg.text) - seg.laid_from <= self.limit // 2
                if self.mode == "blocks" and "\n" not in delta and short:
                    return
                self._layout(seg)
            case SegmentReset(text=text):
                seg = self._open_segment()
                seg.text = text
                seg.rewound = True
                seg.forced = 0
                self._layout(seg)
            case SegmentClosed(text=text, ending="commentary"):
                self._open_segment().closed = text
                self._finish_segment()
            case SegmentClosed(text=text, ending=ending):
                # Finalized at the next item: TurnEnded may still prepend the reasoning.
                seg = self._open_segment()
                seg.closed, seg.ending = text, ending
                if ending in ("interrupted", "failed"):
                    self.cut_text = text
            case ToolStarted() | ToolProgress() | ToolEnded():
                self._finish_segment()
                if isinstance(item, ToolStarted):
                    self._flush_reasoning()
                self._tool(item)
            case ToolCallDelta():
                pass  # client-defined tools are an API matter; a chat offers none
            case (
                ApprovalRequested()
                | ApprovalResolved()
                | ElicitationRequested()
                | ElicitationResolved()
            ):
                pass  # the platform's approval prompt is its own message, not the reply's
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
        if self.mode == "blocks":
            self._blocks(seg)
            return
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
            slot.want = part.text if final or not last else self._growing(part.text)
            slot.final = final or not last
            slot.want_end = end
        if final:
            for index in seg.run[len(parts) :]:
                slot = self.slots[index]
                if slot.dead:
                    continue
                slot.want, slot.final = (_EMPTY if slot.shown is not None else ""), True
                self._surplus(slot)

    def _growing(self, text: str) -> str:
        """The preview of text still being written.

        A stream cannot take text back, and the settled text loses its trailing whitespace:
        a stream shows the text up to its last visible character, so the final text extends
        what it shows (else the stream would end and the message go on by ``chat.update``)."""
        return text.rstrip() if self.mode == "stream" else text + self.cursor

    def _tool(self, event: ToolStarted | ToolProgress | ToolEnded) -> None:
        if self._tools is None:
            self._tools = ToolLines(self.display.tool_progress)
        tools = self._tools_slot
        if self.mode == "blocks" and tools is not None and self.slots[tools].shown is not None:
            # A block went out: the lines after it are the next block.
            self._tools.lines, self._tools_slot = [], None
        self._task(event)
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
        slot.tasks = tuple(self._tasks.values())
        # Without preview a tool message goes out once, when its batch is over; as a block,
        # once enough lines gathered.
        slot.final = self.mode == "blocks" and len(text) >= self.display.min_block_chars

    def _task(self, event: ToolStarted | ToolProgress | ToolEnded) -> None:
        """The batch's calls as a timeline (running → complete / error), for stream mode."""
        if self.mode != "stream":
            return
        key = str(event.index)
        match event:
            case ToolStarted(name=name, args=args):
                summary = summarize(args, 60)
                title = f"{name}: {summary}" if summary else name
                self._tasks[key] = Task(key, title, "in_progress")
            case ToolProgress(note=note) if key in self._tasks and note:
                old = self._tasks[key]
                self._tasks[key] = Task(key, old.title, old.status, note)
            case ToolEnded(ok=ok) if key in self._tasks:
                old = self._tasks[key]
                self._tasks[key] = Task(key, old.title, "complete" if ok else "error", old.details)
            case _:
                return
        if self._tools_slot is not None and not self.slots[self._tools_slot].dead:
            self.slots[self._tools_slot].tasks = tuple(self._tasks.values())

    def _finish_tools(self) -> None:
        if self._tools_slot is not None:
            self.slots[self._tools_slot].final = True
        self._tools = None
        self._tools_slot = None
        self._tasks = {}

    def _end(self, event: TurnEnded) -> None:
        seg = self._segment  # the answer the segment model closed just before, if any
        text = (seg.closed or "") if seg is not None else ""
        answer = text
        if self.display.show_reasoning:
            reasoning = event.reasoning or "".join(self._reasoning)
            if self.mode == "blocks":
                reasoning = "".join(self._reasoning) or ("" if self._reasoning_shown else reasoning)
                if seg is not None and any(self.slots[i].shown is not None for i in seg.run):
                    # The answer is out already: its reasoning follows as a block of its own.
                    self._flush_reasoning(reasoning)
                    reasoning = ""
            answer = with_reasoning(text, reasoning, self.display.reasoning_style)
        if seg is None and answer:
            # No segment carries the answer (the reasoning alone): it becomes its own message.
            seg = self._open_segment()
        if seg is not None:
            self._finish_segment(answer if answer else None)
        self._answer = seg
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
    def _pending(self, slot: Slot) -> bool:
        if slot.pending:
            return True
        # Stream mode: a message whose text is complete still needs its stream ended, and a
        # tool call that finished changes the timeline, not the text.
        return (
            self.mode == "stream"
            and not slot.dead
            and not slot.sealed
            and slot.shown is not None
            and bool(slot.want)
            and (slot.final or slot.tasks != slot.shown_tasks)
        )

    def _sendable(self, slot: Slot) -> bool:
        # Without preview only settled text goes out, once.
        return self._pending(slot) and (self.preview or (slot.final and slot.shown is None))

    def _next(self) -> tuple[int, Send | Edit] | None:
        if self._closed:
            return None
        for index, slot in enumerate(self.slots):
            if self._sendable(slot):
                if slot.message_id is None:
                    # A timeline is always streamed (then ended by its final edit), even when
                    # the batch is over before its message goes out.
                    final = slot.final and not (self.mode == "stream" and slot.tasks)
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
                    if self.mode == "stream" and not slot.sealed:
                        # An abandoned stream: end it as it stands.
                        return index, Edit(
                            index, slot.message_id, slot.shown, cleanup=True, final=True
                        )
                    if slot.shown.endswith(CURSOR):
                        text = slot.shown.removesuffix(CURSOR)
                        return index, Edit(index, slot.message_id, text, cleanup=True)
                    slot.cleaned = True
        return None

    def next_action(self, throttle: Throttle, now: float) -> Action | None:
        if self.ended and not self._fresh_checked:
            self._fresh_checked = True
            self._freshen(now)
        self._idle(now)
        found = self._next()
        if found is not None:
            index, action = found
            kind = "send" if isinstance(action, Send) else "edit"
            draws = self._draws(action)
            if self._ready_at(throttle, index, kind, draws, now) <= now:
                throttle.spend(kind, now, draws)
                return action
        draft = self._draft(throttle)
        if draft is not None and draft[0] <= now:
            self._draft_at = now  # a draft is not a message: no budget of either kind
            return draft[1]
        deletion = self._deletion()
        if found is None:
            if deletion is None:
                throttle.withdraw()
            elif self._delete_ready_at(throttle, deletion, now) <= now:
                throttle.spend("send", now, _DELETE)
                return Delete(deletion.message_id)
        return None

    def due(self, throttle: Throttle, now: float) -> float | None:
        """When ``next_action`` may return something; None while nothing is pending."""
        times: list[float] = []
        found = self._next()
        if found is not None:
            index, action = found
            kind = "send" if isinstance(action, Send) else "edit"
            times.append(self._ready_at(throttle, index, kind, self._draws(action), now))
        draft = self._draft(throttle)
        if draft is not None:
            times.append(max(draft[0], now))
        if self.mode == "blocks" and not self._idle_done and not self.ended:
            times.append(max(self._heard + self.display.block_idle, now))
        deletion = self._deletion()
        if found is None:
            if deletion is None:
                throttle.withdraw()
            else:
                times.append(self._delete_ready_at(throttle, deletion, now))
        return min(times) if times else None

    # -- fresh final ----------------------------------------------------------------------------
    def _freshen(self, now: float) -> None:
        """At the turn's end: send the answer anew if its preview has been up long enough."""
        seg = self._answer
        if self.fresh_after <= 0 or seg is None:
            return
        previews = [
            self.slots[i]
            for i in seg.run
            if self.slots[i].message_id is not None and not self.slots[i].dead
        ]
        if not previews or now - min(p.sent_at for p in previews) < self.fresh_after:
            return
        for slot in previews:
            assert slot.message_id is not None and slot.shown is not None
            slot.replaces = (slot.message_id, slot.shown)
            slot.message_id, slot.shown, slot.failures = None, None, 0
            slot.retry_at = float("-inf")

    def _surplus(self, slot: Slot) -> None:
        """A message the settled text no longer needs: deleted where the platform can (else
        it shows ``…``)."""
        if self.deletes and slot.message_id is not None and slot.want == _EMPTY:
            self._deletes.append(_Deletion(slot.message_id))
            slot.dead = slot.cleaned = True

    def _deletion(self) -> _Deletion | None:
        return self._deletes[0] if self._deletes else None

    # -- drafts -------------------------------------------------------------------------------
    def _draft(self, throttle: Throttle) -> tuple[float, Draft] | None:
        """The draft to show and when: changes at the edit interval, the same text refreshed
        before the platform drops it. None once the turn is over."""
        if not self.drafts or self.ended:
            return None
        text = self._draft_text()
        if text == self._draft_shown:
            wait = DRAFT_REFRESH
        elif _waiting(text, self._draft_shown) >= self.display.buffer_threshold:
            # Early, as an edit would be, but no faster than the chat's budget paces messages.
            wait = min(throttle.interval, throttle.budget.spacing)
        else:
            wait = throttle.interval
        return max(self._draft_at + wait, throttle.blocked_until), Draft(self._draft_id, text)

    def _draft_text(self) -> str:
        seg = self._segment
        text = "" if seg is None else seg.closed if seg.closed is not None else seg.text
        if text:
            # The part being written: the earlier parts will be messages of their own.
            return split(text, self.caps.max_length, self.caps.length_unit)[-1].text
        if self._tools_slot is not None:
            return self.slots[self._tools_slot].want
        return ""  # "Thinking…"

    def drafted(self, draft_id: int) -> bool:
        """Is ``draft_id`` one of this reply's drafts (shown now or earlier)?"""
        return self.drafts and self._first_draft <= draft_id <= self._draft_id

    @property
    def next_draft(self) -> int:
        """The first draft id the chat's next reply may use (never one of this reply's)."""
        return self._draft_id + 1

    def drafts_refused(self) -> None:
        """The platform will not show drafts here: stream this reply by edits instead."""
        if not self.drafts:
            return
        self.drafts, self.mode = False, "edit"
        self.preview = self.caps.can_edit
        if self._segment is not None:
            self._layout(self._segment)

    def _ready_at(
        self, throttle: Throttle, index: int, kind: CallKind, draws: Draws, now: float
    ) -> float:
        slot = self.slots[index]
        if slot.retry_at > now:
            throttle.withdraw()  # not waiting on the budget until then
            return slot.retry_at
        early = _waiting(slot.want, slot.shown) >= self.display.buffer_threshold
        return throttle.ready_at(kind, now, self._priority(), draws, early=early)

    def _priority(self) -> Priority:
        """Where this reply's next call stands in the bot's shared line."""
        if self.ended:
            return "final"  # the turn is over: what is left is the final delivery
        if all(slot.shown is None for slot in self.slots):
            return "first"  # the chat sees nothing of its reply yet
        return "preview"

    def _delete_ready_at(self, throttle: Throttle, deletion: _Deletion, now: float) -> float:
        if deletion.retry_at > now:
            throttle.withdraw()
            return deletion.retry_at
        # The chat's own budget counts it like a send; the shared ones by its own kind (Slack
        # limits chat.delete per workspace).
        return throttle.ready_at("send", now, "final", _DELETE)

    @property
    def settled(self) -> bool:
        return self.ended and self._next() is None and not self._deletes

    # -- results ------------------------------------------------------------------------------
    def landed(self, action: Action, throttle: Throttle, message_id: str | None = None) -> None:
        throttle.succeeded()
        if isinstance(action, Draft):
            self._draft_shown = action.text
            return
        if isinstance(action, Delete):
            self._deletes.pop(0)
            return
        if isinstance(action, Send):
            # A message clears the chat's draft: the next one starts afresh.
            self._draft_id += 1
            self._draft_shown = None
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
            if slot.replaces is not None:
                self._deletes.append(_Deletion(slot.replaces[0]))
                slot.replaces = None
        slot.failures = 0
        if message_id:
            slot.message_id = message_id
        if self.mode == "blocks":
            self._block_landed(action.slot)
            return
        if slot.final and not slot.want:
            # Its segment settled to less text while this was on its way: take the rest back.
            slot.want = _EMPTY
            self._surplus(slot)

    def rate_limited(
        self, action: Action, throttle: Throttle, retry_after: float, now: float
    ) -> None:
        throttle.rate_limited(retry_after, now)
        if isinstance(action, Delete):
            self._delete_failed(now, throttle)
        elif isinstance(action, Send) and self.slots[action.slot].replaces is not None:
            self._unfresh(self.slots[action.slot], now, throttle)
        elif not isinstance(action, Draft):
            self._failed(action, now, throttle)

    def failed(self, action: Action, throttle: Throttle, now: float, *, maybe_landed: bool) -> None:
        if isinstance(action, Draft):
            return  # a preview only: the next one is due an interval after this attempt
        if isinstance(action, Delete):
            self._delete_failed(now, throttle)
            return
        slot = self.slots[action.slot]
        if isinstance(action, Send) and slot.replaces is not None:
            if not maybe_landed:
                self._unfresh(slot, now, throttle)
                return
            # Counted as delivered, like any send whose answer was lost.
            self._deletes.append(_Deletion(slot.replaces[0]))
            slot.replaces = None
        if maybe_landed and isinstance(action, Send):
            # It may be in the chat: never send it again, and it cannot be edited.
            slot.shown, slot.shown_end = action.text, action.end
            if self.mode == "blocks":
                self._block_landed(action.slot)  # a block is never edited anyway
                return
            self._abandon(action.slot)
            return
        self._failed(action, now, throttle)

    def _unfresh(self, slot: Slot, now: float, throttle: Throttle) -> None:
        """The fresh copy did not go out: finish the preview in place instead."""
        assert slot.replaces is not None
        slot.message_id, slot.shown = slot.replaces
        slot.replaces = None
        slot.retry_at = now + throttle.interval

    def _delete_failed(self, now: float, throttle: Throttle) -> None:
        deletion = self._deletes[0]
        deletion.failures += 1
        deletion.retry_at = now + throttle.interval
        if deletion.failures >= FINAL_ATTEMPTS:
            self._deletes.pop(0)  # the preview stays: the answer shows twice, never lost

    def _failed(self, action: Send | Edit, now: float, throttle: Throttle) -> None:
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
        if self.mode == "blocks":
            self._layout(seg)  # the block's text is given up; the next one follows it
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

    # -- blocks -------------------------------------------------------------------------------
    def _blocks(self, seg: _Segment) -> None:
        """Blocks mode: the segment's complete blocks as messages, each sent once, whole."""
        unit = self.caps.length_unit
        done = [i for i in seg.run if self.slots[i].shown is not None or self.slots[i].dead]
        committed = self._committed(seg, done)
        text = self._block_text(seg)
        if not text.startswith(seg.sent):
            # A reset took back text a block showed: restate from the start of that block.
            kept = common_prefix(seg.sent, text)
            # (A replay that stopped short restates its last block: the reply ends there.)
            restart = max((c for c in seg.cuts if c <= kept and c < len(text)), default=0)
            for index in seg.run:
                if self.slots[index].shown is None:
                    self.slots[index].want = ""
            seg.run, seg.starts, done = [], [], []
            seg.cuts = [cut for cut in seg.cuts if cut < restart]
            seg.base, seg.sent, seg.forced = restart, text[:restart], 0
            seg.correcting = True
            committed = restart
        seg.laid_from = committed
        interrupted = seg.final is not None and seg.ending == "interrupted"
        limit = self.limit
        if seg.correcting:
            limit -= len(CORRECTION)
        if interrupted:
            limit -= len(INTERRUPTED)
        min_chars = self.display.min_block_chars
        starts = self._block_starts(seg)  # a block that began mid-line reads it as a line
        if interrupted:
            cut = block_end(text, committed, 0, limit, unit, idle=True, starts=starts)
        elif seg.final is not None:
            cut = len(text)
        else:
            cut = block_end(text, committed, min_chars, limit, unit, starts=starts)
            if committed < seg.forced <= len(text):
                cut = max(cut, seg.forced)
        blocks: list[tuple[int, int, str]] = []  # (start, end, text)
        end = committed
        more = cut < len(text)  # a block cut inside code (a full message) closes its fence
        parts = (
            split(text[:cut], limit, unit, start=committed, starts=starts, going_on=more)
            if cut > committed
            else []
        )
        for part in parts:
            start, end = end, end + len(part.raw)
            if part.raw.strip():  # whitespace between blocks is no message
                blocks.append((start, end, part.text))
        if interrupted and text[committed:].strip() and not seg.marked:
            if blocks:
                start, end, last = blocks[-1]
                blocks[-1] = (start, end, last.rstrip() + INTERRUPTED)
            else:
                blocks.append((committed, committed, INTERRUPTED.strip()))
        if seg.correcting and blocks:
            start, end, first = blocks[0]
            blocks[0] = (start, end, CORRECTION + first)
        waiting = seg.run[len(done) :]
        for k, (start, end, body) in enumerate(blocks):
            if k < len(waiting):
                index = waiting[k]
                seg.starts[len(done) + k] = start
            else:
                index = len(self.slots)
                self.slots.append(Slot("text"))
                seg.run.append(index)
                seg.starts.append(start)
                self._segment_slot_of[index] = seg
            slot = self.slots[index]
            slot.want, slot.final, slot.want_end = body, True, end
        for index in waiting[len(blocks) :]:
            slot = self.slots[index]
            slot.want, slot.final = "", False

    @staticmethod
    def _block_starts(seg: _Segment) -> list[int]:
        """Where the segment's blocks so far began (landed, given up or waiting)."""
        return [*seg.cuts, *seg.starts]

    def _committed(self, seg: _Segment, done: list[int]) -> int:
        """Where the segment's text not yet in a block starts."""
        if not done:
            return seg.base
        slot = self.slots[done[-1]]
        return slot.shown_end if slot.shown is not None else slot.want_end

    def _block_text(self, seg: _Segment) -> str:
        """The text the segment's blocks are cut from.

        The settled text is the streamed text with its whitespace trimmed (and a failure's
        notice after it): blocks already out index the streamed text, so it stays."""
        if seg.final is None:
            return seg.text
        closed = seg.closed
        if closed is None or not seg.final.startswith(closed) or seg.text.strip() != closed.strip():
            return seg.final
        body = seg.text[: max(len(seg.text.rstrip()), len(seg.sent))]
        return body + seg.final[len(closed) :]

    def _block_landed(self, index: int) -> None:
        seg = self._segment_slot_of.get(index)
        if seg is None or index not in seg.run:
            return
        slot = self.slots[index]
        seg.sent = self._block_text(seg)[: slot.shown_end]
        seg.cuts.append(seg.starts[seg.run.index(index)])
        seg.correcting = False
        seg.marked = seg.marked or (slot.shown or "").endswith(INTERRUPTED.strip())
        self._layout(seg)

    def _flush_reasoning(self, reasoning: str | None = None) -> None:
        """Blocks mode: the reasoning so far goes out as blocks, before what follows it."""
        if self.mode != "blocks" or not self.display.show_reasoning:
            return
        if reasoning is None:
            reasoning = "".join(self._reasoning)
        self._reasoning = []
        layout = with_reasoning("", reasoning, self.display.reasoning_style)
        if not layout.strip():
            return
        self._reasoning_shown = True
        for part in split(layout, self.limit, self.caps.length_unit):
            self.slots.append(Slot("notice", want=part.text, final=True))

    def _idle(self, now: float) -> None:
        """Blocks mode: after ``block_idle`` seconds of silence, what is complete goes."""
        if self.mode != "blocks" or self._idle_done or self.ended:
            return
        if now < self._heard + self.display.block_idle:
            return
        self._idle_done = True
        seg = self._segment
        if seg is not None and seg.final is None:
            done = [i for i in seg.run if self.slots[i].shown is not None or self.slots[i].dead]
            committed = self._committed(seg, done)
            unit = self.caps.length_unit
            starts = self._block_starts(seg)
            seg.forced = block_end(
                seg.text, committed, 0, self.limit, unit, idle=True, starts=starts
            )
            self._layout(seg)
        if self._tools_slot is not None:
            slot = self.slots[self._tools_slot]
            if slot.want and slot.shown is None and not slot.dead:
                slot.final = True

    def close(self) -> None:
        """The chat takes no more messages now (WhatsApp outside its 24-hour window): what is
        not out stays unsent, and nothing more is tried for this reply."""
        self._closed = True
        self._deletes.clear()

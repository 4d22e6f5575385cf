"""The frame encoder of the iris protocol: one turn's events in, frame bodies out. Pure.

The encoder does not follow text segments itself: it feeds each event to the segment model
(``iris.segments``) and turns the facts into frames. A segment is a message (``message_id``);
its growth and its resets are ``message.update`` snapshots; its close is ``message.stop``
(``message`` when it never streamed) or ``commentary``. A frame body is a plain dict typed by
``iris.protocol.types``; the hub adds ``chat_id`` and ``seq``.

The encoder owns the gateway cadence (doc 05 §5.1): a segment's first streamed text goes out at
once (``message.start`` + ``message.update``), then a full-snapshot ``message.update`` whenever
``buffer_threshold`` new characters are waiting or ``edit_interval`` seconds have passed since
the last one; a reset (a retry that diverged from what was shown) goes out at once. Time enters
only as the ``now`` argument; ``deadline()`` tells the transport when to call ``tick(now)`` if
no event comes first. A segment whose text came only with its closer (``SegmentEnded``,
``Commentary``, the turn's end) never streamed: it goes out whole.

Per turn::

    typing{on:true}
    ( message.start  message.update*  (message.stop | commentary)     streaming on
    | message | commentary                                           streaming off
    | tool.start tool.progress* tool.end )*
    error?                                              the turn failed, or output cap hit
    typing{on:false}                                                 always last

A reply's ``message.stop`` (or ``message``) waits for the next item of the model, so that the
last one carries the turn's model and token count from ``TurnEnded``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, assert_never, cast

from iris.events import (
    ApprovalRequested,
    ApprovalResolved,
    ElicitationRequested,
    ElicitationResolved,
    Event,
    ReasoningDelta,
    StreamReset,
    TextDelta,
    ToolCallDelta,
    ToolEnded,
    ToolProgress,
    ToolStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.formats.reasoning import split_reasoning
from iris.formats.tool_summary import summarize
from iris.protocol.types import (
    OUTPUT_PREVIEW_CHARS,
    ApprovalRequest,
    ElicitationRequest,
    Message,
    MessageStop,
    MessageUpdate,
    ServerFrame,
)
from iris.segments import (
    Item,
    SegmentClosed,
    SegmentGrown,
    SegmentOpened,
    SegmentReset,
    Segments,
)

TOOL_PREVIEW_CHARS = 80


@dataclass(frozen=True, slots=True)
class EncoderSettings:
    streaming: bool = True
    show_reasoning: bool = False
    edit_interval: float = 0.8
    buffer_threshold: int = 48


def new_message_id() -> str:
    return f"m_{uuid.uuid4().hex[:16]}"


@dataclass
class _Bubble:
    """The message the open segment is shown as."""

    message_id: str
    # The latest growth (its text is joined only when sent), or the text after a reset.
    latest: SegmentGrown | str = ""
    waiting: int = 0  # characters grown since the last message.update
    started: bool = False  # message.start went out
    last_update: float = 0.0

    @property
    def text(self) -> str:
        return self.latest if isinstance(self.latest, str) else self.latest.text


@dataclass
class _Reply:
    """A closed segment whose stop/message waits to learn whether the turn ends next."""

    message_id: str
    text: str
    started: bool
    reasoning: str


@dataclass
class FrameEncoder:
    settings: EncoderSettings = field(default_factory=EncoderSettings)
    new_id: Callable[[], str] = new_message_id
    model: str = ""
    schedule_id: str = ""  # a scheduled run's: its message.start carries it
    finished: bool = False
    _segments: Segments = field(default_factory=Segments)
    _bubble: _Bubble | None = None
    _pending: _Reply | None = None
    _round_reasoning: str = ""  # reasoning of the model round now running
    _carried_reasoning: str = ""  # reasoning of earlier rounds not yet attached to a reply
    _now: float = 0.0

    def begin(self) -> list[ServerFrame]:
        return [{"type": "typing", "on": True}]

    # -- time ----------------------------------------------------------------------------------
    def deadline(self) -> float | None:
        """When ``tick`` would send the waiting text, or None if nothing waits."""
        bubble = self._bubble
        if bubble is None or not bubble.started or not bubble.waiting:
            return None
        return bubble.last_update + self.settings.edit_interval

    def tick(self, now: float) -> list[ServerFrame]:
        deadline = self.deadline()
        if deadline is None or now < deadline or self._bubble is None:
            return []
        return [self._update(self._bubble, now)]

    # -- events --------------------------------------------------------------------------------
    def feed(self, event: Event, now: float) -> list[ServerFrame]:
        if self.finished:
            return []
        self._now = now
        # Text shows as it grows only when it streams as deltas; a closer's own text goes out
        # with the close.
        streamed = isinstance(event, TextDelta)
        out: list[ServerFrame] = []
        for item in self._segments.feed(event):
            out += self._item(item, now, streamed)
        return out

    def fail(self, code: str, message: str) -> list[ServerFrame]:
        """End the turn with an error, also when it broke outside the event stream."""
        return self.feed(TurnFailed(code, message), self._now)

    def _item(self, item: Item, now: float, streamed: bool) -> list[ServerFrame]:
        if isinstance(item, TurnEnded):
            return self._ended(item)
        out = self._flush()
        match item:
            case SegmentOpened():
                self._bubble = _Bubble(self.new_id())
            case SegmentGrown():
                out += self._grown(item, now, streamed)
            case SegmentReset(text=text):
                out += self._reset(text, now)
            case SegmentClosed():
                out += self._closed(item)
            case TurnStarted(model=model):
                self.model = model
            case ReasoningDelta(text=text):
                self._round_reasoning += text
            case StreamReset(model=model):
                # The restarted round's reasoning replaces the old; its text comes as facts.
                self.model = model or self.model
                self._round_reasoning = ""
            case ToolStarted() | ToolProgress() | ToolEnded():
                out.append(tool_frame(item))
            case ToolCallDelta():
                pass  # the iris socket offers the agent's own tools only, never a client's
            case ApprovalRequested():
                out.append(approval_request(item))
            case ApprovalResolved():
                out.append(approval_resolved(item))
            case ElicitationRequested():
                out.append(elicitation_request(item))
            case ElicitationResolved(elicitation_id=elicitation_id, action=action, by=by):
                out.append(
                    {
                        "type": "elicitation.resolved",
                        "elicitation_id": elicitation_id,
                        "action": action,
                        "by": by,
                    }
                )
            case TurnFailed(code=code, message=message):
                out.append({"type": "error", "code": code, "message": message})
                out += self._finish()
            case _:
                assert_never(item)
        return out

    def _ended(self, item: TurnEnded) -> list[ServerFrame]:
        self.model = item.model or self.model
        out = self._flush(_tokens(item.usage), item.reasoning)
        if item.reason == "length":
            # The shown text stays; the device learns why the answer stops there.
            message = "the answer was cut at the server's output limit"
            out.append({"type": "error", "code": "output_too_long", "message": message})
        return [*out, *self._finish()]

    def _finish(self) -> list[ServerFrame]:
        self.finished = True
        return [{"type": "typing", "on": False}]

    # -- segments ------------------------------------------------------------------------------
    def _grown(self, item: SegmentGrown, now: float, streamed: bool) -> list[ServerFrame]:
        bubble = self._bubble
        if bubble is None:  # the model opens every segment before it grows
            bubble = self._bubble = _Bubble(self.new_id())
        bubble.latest = item
        if not self.settings.streaming or not streamed:
            return []  # text a closer brought goes out with the close
        bubble.waiting += len(item.delta)
        if not bubble.started:
            bubble.started = True
            start: ServerFrame = {
                "type": "message.start",
                "message_id": bubble.message_id,
                "role": "assistant",
            }
            if self.schedule_id:
                start["schedule_id"] = self.schedule_id
            return [start, self._update(bubble, now)]
        if (
            bubble.waiting >= self.settings.buffer_threshold
            or now >= bubble.last_update + self.settings.edit_interval
        ):
            return [self._update(bubble, now)]
        return []

    def _reset(self, text: str, now: float) -> list[ServerFrame]:
        """A retry diverged from what was shown: a device that saw it gets the new text now."""
        bubble = self._bubble
        if bubble is None:
            return []
        bubble.latest = text
        return [self._update(bubble, now)] if bubble.started else []

    def _update(self, bubble: _Bubble, now: float) -> MessageUpdate:
        bubble.waiting = 0
        bubble.last_update = now
        return {"type": "message.update", "message_id": bubble.message_id, "text": bubble.text}

    def _closed(self, item: SegmentClosed) -> list[ServerFrame]:
        bubble, self._bubble = self._bubble, None
        message_id = bubble.message_id if bubble is not None else self.new_id()
        if item.ending == "commentary":
            # A streamed bubble keeps its id: the frame closes it. Its reasoning goes with the
            # next reply.
            self._carried_reasoning += self._round_reasoning
            self._round_reasoning = ""
            return [{"type": "commentary", "message_id": message_id, "text": item.text}]
        reasoning = self._carried_reasoning + self._round_reasoning
        self._carried_reasoning = self._round_reasoning = ""
        started = bubble is not None and bubble.started
        self._pending = _Reply(message_id, item.text, started, reasoning)
        if item.ending == "failed":  # the error follows it: no model or tokens to wait for
            return self._flush()
        return []

    def _flush(self, tokens: int | None = None, reasoning: str = "") -> list[ServerFrame]:
        pending, self._pending = self._pending, None
        if pending is None:
            return []
        return [self._reply(pending, tokens, pending.reasoning or reasoning)]

    def _reply(self, pending: _Reply, tokens: int | None, reasoning: str) -> MessageStop | Message:
        inline, text = split_reasoning(pending.text)
        reasoning = reasoning or inline or ""
        frame: MessageStop | Message
        if pending.started:
            frame = {"type": "message.stop", "message_id": pending.message_id, "final_text": text}
        else:
            frame = {
                "type": "message",
                "message_id": pending.message_id,
                "text": text,
                "role": "assistant",
            }
        if self.settings.show_reasoning and reasoning:
            frame["reasoning"] = reasoning
        if self.model:
            frame["model"] = self.model
        if tokens is not None:
            frame["tokens"] = tokens
        return frame


def tool_frame(item: ToolStarted | ToolProgress | ToolEnded) -> ServerFrame:
    """The ``tool.start``, ``tool.progress`` or ``tool.end`` frame of a tool event."""
    match item:
        case ToolStarted(index=index, name=name, args=args):
            preview = tool_preview(args)
            return {
                "type": "tool.start",
                "index": index,
                "name": name,
                "preview": preview,
                "args": args,
            }
        case ToolProgress(index=index, name=name, note=note):
            return {"type": "tool.progress", "index": index, "name": name, "note": note}
        case ToolEnded(index=index, name=name, ok=ok, duration=duration, output_preview=tail):
            return {
                "type": "tool.end",
                "index": index,
                "name": name,
                "ok": ok,
                "duration": duration,
                "output_preview": tail[-OUTPUT_PREVIEW_CHARS:],
            }


def approval_resolved(item: ApprovalResolved) -> ServerFrame:
    """The ``approval.resolved`` frame: how a request ended, and who ended it."""
    return {
        "type": "approval.resolved",
        "approval_id": item.approval_id,
        "decision": item.decision,
        "by": item.by,
    }


def approval_request(request: ApprovalRequested) -> ApprovalRequest:
    """The ``approval.request`` frame of a request (also what a ``sync`` carries)."""
    return {
        "type": "approval.request",
        "approval_id": request.approval_id,
        "index": request.index,
        "name": request.name,
        "args": arguments(request.args),
        "preview": request.preview,
        "expires_at": request.expires_at,
    }


def elicitation_request(request: ElicitationRequested) -> ElicitationRequest:
    """The ``elicitation.request`` frame of a request."""
    frame: ElicitationRequest = {
        "type": "elicitation.request",
        "elicitation_id": request.elicitation_id,
        "server": request.server,
        "message": request.message,
        "schema": request.schema,
        "expires_at": request.expires_at,
    }
    if request.url:
        frame["url"] = request.url
    return frame


def arguments(text: str) -> dict[str, Any]:
    """A call's JSON arguments as the object frames carry (``tool.start.args``'s shape), with
    the agent's own wrapping of what is not one: ``_raw`` (not JSON), ``_value`` (not an
    object)."""
    try:
        value: Any = json.loads(text)
    except ValueError:
        return {"_raw": text}
    return cast(dict[str, Any], value) if isinstance(value, dict) else {"_value": value}


def tool_preview(args: dict[str, Any]) -> str:
    """A one-line summary of a call's arguments (the app shows it when truncating)."""
    return summarize(args, TOOL_PREVIEW_CHARS)


def _tokens(usage: dict[str, int]) -> int | None:
    if "output_tokens" in usage:
        return usage["output_tokens"]
    return usage.get("total_tokens")


def encode(
    events: Iterable[Event],
    settings: EncoderSettings | None = None,
    new_id: Callable[[], str] = new_message_id,
) -> list[ServerFrame]:
    """All frame bodies of a whole turn fed at one instant (tests and replays)."""
    encoder = FrameEncoder(settings or EncoderSettings(), new_id)
    out = encoder.begin()
    for event in events:
        out += encoder.feed(event, 0.0)
    return out

"""The frame encoder of the iris protocol: one turn's events in, frame bodies out. Pure.

A frame body is a plain dict with ``type`` and its fields; the hub adds ``chat_id`` and ``seq``.
The encoder owns the gateway cadence (doc 05 §5.1): a segment's first text goes out at once
(``message.start`` + ``message.update``), then a full-snapshot ``message.update`` whenever
``buffer_threshold`` new characters are waiting or ``edit_interval`` seconds have passed since
the last one. Time enters only as the ``now`` argument; ``deadline()`` tells the transport when
to call ``tick(now)`` if no event comes first.

Per turn::

    typing{on:true}
    ( message.start  message.update*  (message.stop | commentary)     streaming on
    | message | commentary                                           streaming off
    | tool.start tool.progress* tool.end )*
    error?                                              the turn failed, or output cap hit
    typing{on:false}                                                 always last

A segment's ``message.stop`` waits for the next event, so that the last one carries the
turn's model and token count from ``TurnEnded``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, assert_never

from iris.events import (
    Commentary,
    Event,
    ReasoningDelta,
    SegmentEnded,
    StreamReset,
    TextDelta,
    ToolEnded,
    ToolProgress,
    ToolStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.surfaces.iris.protocol import (
    OUTPUT_PREVIEW_CHARS,
    Message,
    MessageStop,
    MessageUpdate,
    ServerFrame,
)
from iris.surfaces.iris.reasoning import split_reasoning

Frame = ServerFrame  # a frame body: the hub adds chat_id and seq
TOOL_PREVIEW_CHARS = 80
# Argument names whose value says best what a tool call does, in order of preference.
_PREVIEW_KEYS = ("command", "path", "query", "url", "file", "pattern")


@dataclass(frozen=True, slots=True)
class EncoderSettings:
    streaming: bool = True
    show_reasoning: bool = False
    edit_interval: float = 0.8
    buffer_threshold: int = 24


def new_message_id() -> str:
    return f"m_{uuid.uuid4().hex[:16]}"


@dataclass
class _Segment:
    message_id: str
    text: str = ""
    sent: str = ""  # the text of the last message.update
    started: bool = False  # message.start went out
    last_update: float = 0.0


@dataclass
class _PendingClose:
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
    finished: bool = False
    _segment: _Segment | None = None
    _pending: _PendingClose | None = None
    _round_reasoning: str = ""  # reasoning of the model round now running
    _carried_reasoning: str = ""  # reasoning of earlier rounds not yet attached to a reply
    _shown_reply: bool = False

    def begin(self) -> list[Frame]:
        return [{"type": "typing", "on": True}]

    # -- time ----------------------------------------------------------------------------------
    def deadline(self) -> float | None:
        """When ``tick`` would send the waiting text, or None if nothing waits."""
        seg = self._segment
        if seg is None or not seg.started or seg.text == seg.sent:
            return None
        return seg.last_update + self.settings.edit_interval

    def tick(self, now: float) -> list[Frame]:
        deadline = self.deadline()
        if deadline is None or now < deadline or self._segment is None:
            return []
        return [self._update(self._segment, now)]

    # -- events --------------------------------------------------------------------------------
    def feed(self, event: Event, now: float) -> list[Frame]:
        if self.finished:
            return []
        out: list[Frame] = []
        match event:
            case TurnStarted(model=model):
                self.model = model
            case TextDelta(text=text):
                out += self._text(text, now)
            case ReasoningDelta(text=text):
                self._round_reasoning += text
            case StreamReset(model=model):
                # The restarted round's text replaces what was shown; so does its reasoning.
                self.model = model or self.model
                self._round_reasoning = ""
                seg = self._segment
                if seg is not None:
                    seg.text = ""
                    if seg.started and seg.sent:
                        out.append(self._update(seg, now))
            case Commentary(text=text):
                out += self._flush_pending()
                seg, self._segment = self._segment, None
                self._carried_reasoning += self._round_reasoning
                self._round_reasoning = ""
                if text or (seg is not None and seg.started):
                    # A streamed segment keeps its id: the frame closes that bubble.
                    message_id = seg.message_id if seg is not None else self.new_id()
                    out.append({"type": "commentary", "message_id": message_id, "text": text})
            case SegmentEnded(text=text):
                out += self._flush_pending()
                self._close_segment(text)
            case ToolStarted(index=index, name=name, args=args):
                out += self._flush_pending()
                out += self._close_open_segment()
                out.append(
                    {
                        "type": "tool.start",
                        "index": index,
                        "name": name,
                        "preview": tool_preview(args),
                        "args": args,
                    }
                )
            case ToolProgress(index=index, name=name, note=note):
                out.append({"type": "tool.progress", "index": index, "name": name, "note": note})
            case ToolEnded(index=index, name=name, ok=ok, duration=duration, output_preview=tail):
                out.append(
                    {
                        "type": "tool.end",
                        "index": index,
                        "name": name,
                        "ok": ok,
                        "duration": duration,
                        "output_preview": tail[-OUTPUT_PREVIEW_CHARS:],
                    }
                )
            case TurnEnded():
                self.model = event.model or self.model
                out += self._finish_replies(event.text, event.reasoning, _tokens(event.usage))
                if event.reason == "length":
                    # The shown text stays; the device learns why the answer stops there.
                    message = "the answer was cut at the server's output limit"
                    out.append({"type": "error", "code": "output_too_long", "message": message})
                out.append({"type": "typing", "on": False})
                self.finished = True
            case TurnFailed(code=code, message=message, partial_text=partial):
                out += self._flush_pending()
                out += self._close_open_segment(partial)
                out += self.fail(code, message)
            case _:
                assert_never(event)
        return out

    def fail(self, code: str, message: str) -> list[Frame]:
        """End the turn with an error, also when it broke outside the event stream."""
        if self.finished:
            return []
        out = self._flush_pending() + self._close_open_segment()
        out.append({"type": "error", "code": code, "message": message})
        out.append({"type": "typing", "on": False})
        self.finished = True
        return out

    # -- segments ------------------------------------------------------------------------------
    def _text(self, text: str, now: float) -> list[Frame]:
        if not text:
            return []
        seg = self._segment
        if seg is None:
            seg = self._segment = _Segment(self.new_id())
        seg.text += text
        if not self.settings.streaming:
            return []
        if not seg.started:
            seg.started = True
            return [
                {"type": "message.start", "message_id": seg.message_id, "role": "assistant"},
                self._update(seg, now),
            ]
        waiting = len(seg.text) - len(seg.sent) if seg.text.startswith(seg.sent) else len(seg.text)
        if (
            waiting >= self.settings.buffer_threshold
            or now >= seg.last_update + self.settings.edit_interval
        ):
            return [self._update(seg, now)]
        return []

    def _update(self, seg: _Segment, now: float) -> MessageUpdate:
        seg.sent = seg.text
        seg.last_update = now
        return {"type": "message.update", "message_id": seg.message_id, "text": seg.text}

    def _close_segment(self, text: str) -> None:
        """Hold the segment's stop/message until the next event says whether the turn ends."""
        seg, self._segment = self._segment, None
        reasoning = self._carried_reasoning + self._round_reasoning
        self._carried_reasoning = self._round_reasoning = ""
        if seg is None:
            if not text:
                return
            seg = _Segment(self.new_id())
        self._pending = _PendingClose(seg.message_id, text or seg.text, seg.started, reasoning)

    def _close_open_segment(self, text: str = "") -> list[Frame]:
        """A segment cut short (interrupt, failure) ends with the text it has shown."""
        if self._segment is None:
            return []
        self._close_segment(text or self._segment.text)
        return self._flush_pending()

    def _flush_pending(self, tokens: int | None = None, reasoning: str = "") -> list[Frame]:
        pending, self._pending = self._pending, None
        if pending is None:
            return []
        self._shown_reply = True
        return [self._reply(pending, tokens, pending.reasoning or reasoning)]

    def _finish_replies(self, text: str, reasoning: str, tokens: int | None) -> list[Frame]:
        if self._segment is not None:  # cut short without a closer: keep what it showed
            self._close_segment(self._segment.text or text)
        if self._pending is None and not self._shown_reply and text:
            # A turn that told its answer only in TurnEnded still gets one reply.
            self._pending = _PendingClose(self.new_id(), text, False, "")
        return self._flush_pending(tokens, reasoning)

    def _reply(
        self, pending: _PendingClose, tokens: int | None, reasoning: str
    ) -> MessageStop | Message:
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


def tool_preview(args: dict[str, Any]) -> str:
    """A one-line summary of a call's arguments (the app shows it when truncating)."""
    value: Any = next((args[k] for k in _PREVIEW_KEYS if isinstance(args.get(k), str)), None)
    if value is None:
        value = next((v for v in args.values() if isinstance(v, str)), None)
    line = value if isinstance(value, str) else json.dumps(args, ensure_ascii=False)
    line = " ".join(line.split())
    if len(line) > TOOL_PREVIEW_CHARS:
        line = line[: TOOL_PREVIEW_CHARS - 1] + "…"
    return line


def _tokens(usage: dict[str, int]) -> int | None:
    if "output_tokens" in usage:
        return usage["output_tokens"]
    return usage.get("total_tokens")


def encode(
    events: Iterable[Event],
    settings: EncoderSettings | None = None,
    new_id: Callable[[], str] = new_message_id,
) -> list[Frame]:
    """All frame bodies of a whole turn fed at one instant (tests and replays)."""
    encoder = FrameEncoder(settings or EncoderSettings(), new_id)
    out = encoder.begin()
    for event in events:
        out += encoder.feed(event, 0.0)
    return out

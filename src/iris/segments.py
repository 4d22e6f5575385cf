"""The segment model: one turn's events in, the lifecycle of its text segments out. Pure.

Every surface shows the same thing: text segments that open, grow, may be reset by a retry or
fallback, and close as an answer, as commentary (text that accompanied tool calls), or cut short
(interrupted, failed). ``Segments.feed`` turns each ``iris.events`` event into *items*: segment
facts, plus every event that is not segment text passed through unchanged (``TurnStarted``,
``ReasoningDelta``, ``StreamReset``, the tool events, ``TurnEnded``, ``TurnFailed``), so a
consumer has one loop over one stream::

    segments = Segments()
    async for event in turn:
        for item in segments.feed(event):
            match item:
                case SegmentGrown(text=snapshot, delta=delta): ...
                case SegmentReset(text=snapshot): ...
                case SegmentClosed(text=final, ending=ending): ...
                case ToolStarted(): ...

The facts, per segment (``segment`` numbers them from 0 within the turn):

- ``SegmentOpened`` before its first text;
- ``SegmentGrown``: the whole text now (``text``, for surfaces that show snapshots) and what it
  added (``delta``, for append-only surfaces);
- ``SegmentReset``: a retry replayed the segment and diverged from what was shown. The segment
  now shows ``text``, whose first ``kept`` characters are the common prefix of what was shown
  and the replay; the rest of the shown text is dropped. While a replay repeats shown text,
  nothing is reported; a replay that only goes further is plain growth. A replay that stops
  short of the shown text is a reset at the segment's close;
- ``SegmentClosed`` with the final, post-processed ``text`` and its ``ending``: ``commentary``
  (``Commentary``, or text still open when tools run or the turn ends for the client's tool
  calls), ``answer`` (``SegmentEnded``; its text is ``TurnEnded.text`` when the turn gives
  one), ``interrupted`` (``TurnEnded`` reason ``interrupted``) or ``failed`` (``TurnFailed``,
  its ``partial_text``). A ``SegmentEnded`` is reported at the next event,
  which says which of these it was. Text the agent held back (a closer longer than the stream)
  is growth before the close; an answer given only in ``TurnEnded`` is a segment of its own.

``Segments.grew`` is the fast lane of a plain text delta for such surfaces: the segment
records it, and no item is made.

``appended`` is the rule for surfaces that cannot take text back (SSE): growth is sent as it
comes; a reset sends the replay whole after a blank line, so the client sees both attempts
rather than a spliced one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, assert_never

from iris.events import (
    ApprovalRequested,
    ApprovalResolved,
    Commentary,
    ElicitationRequested,
    ElicitationResolved,
    Event,
    ReasoningDelta,
    SegmentEnded,
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

Ending = Literal["answer", "commentary", "interrupted", "failed"]


@dataclass(frozen=True, slots=True)
class SegmentOpened:
    segment: int


class SegmentGrown:
    """The segment's text grew: ``text`` is all of it now, ``delta`` what was added.

    ``text`` is joined when read: a surface that reads only ``delta`` keeps a long reply linear
    instead of copying the growing text at every delta."""

    __slots__ = ("_end", "_text", "delta", "segment")
    __match_args__ = ("segment", "text", "delta")

    def __init__(self, segment: int, text: str | _Text, delta: str) -> None:
        self.segment = segment
        self.delta = delta
        self._text = text if isinstance(text, _Text) else _Text(text)
        self._end = len(self._text)

    @property
    def text(self) -> str:
        return self._text.prefix(self._end)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SegmentGrown):
            return NotImplemented
        return (self.segment, self.delta, self.text) == (other.segment, other.delta, other.text)

    def __hash__(self) -> int:
        return hash((self.segment, self.delta, self.text))

    def __repr__(self) -> str:
        return f"SegmentGrown(segment={self.segment}, text={self.text!r}, delta={self.delta!r})"


@dataclass(frozen=True, slots=True)
class SegmentReset:
    """A replay diverged: the segment shows ``text`` now; ``text[:kept]`` was shown before
    (the common prefix), ``shown[kept:]`` is dropped. ``reason``/``model``: the StreamReset's."""

    segment: int
    text: str
    kept: int
    shown: str
    reason: str = ""
    model: str = ""


@dataclass(frozen=True, slots=True)
class SegmentClosed:
    """The segment ended. ``text``: its final post-processed text; ``shown``: the text the
    facts had reported (what a streaming surface shows; it may differ by trimmed whitespace)."""

    segment: int
    text: str
    ending: Ending
    shown: str = ""


Fact = SegmentOpened | SegmentGrown | SegmentReset | SegmentClosed
Passed = (
    TurnStarted
    | ReasoningDelta
    | StreamReset
    | ToolStarted
    | ToolProgress
    | ToolEnded
    | ToolCallDelta
    | ApprovalRequested
    | ApprovalResolved
    | ElicitationRequested
    | ElicitationResolved
    | TurnEnded
    | TurnFailed
)
Item = Fact | Passed


class _Text:
    """A growing text kept as parts: joining only when read keeps appending linear."""

    __slots__ = ("_parts", "_size")

    def __init__(self, text: str = "") -> None:
        self._parts = [text] if text else []
        self._size = len(text)

    def __len__(self) -> int:
        return self._size

    def append(self, text: str) -> None:
        self._parts.append(text)
        self._size += len(text)

    def prefix(self, end: int) -> str:
        if len(self._parts) > 1:
            self._parts[:] = ["".join(self._parts)]
        whole = self._parts[0] if self._parts else ""
        return whole if end == len(whole) else whole[:end]

    @property
    def value(self) -> str:
        return self.prefix(self._size)


def common_prefix(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Track:
    """One stretch of text as a client has been shown it, across resets. Pure.

    ``grow`` takes a delta and returns the facts it makes: after ``restart`` a replay is
    compared with what was shown, and reported only where it goes further or diverges.
    ``settle`` ends a pending replay: one that stopped short of the shown text is a reset."""

    def __init__(self, segment: int = 0) -> None:
        self.segment = segment
        self._text = _Text()
        self._replayed: int | None = None  # after a restart: shown characters the replay repeated
        self._reason = ""
        self._model = ""

    @property
    def shown(self) -> str:
        """The text the facts so far have reported."""
        return self._text.value

    @property
    def current(self) -> str:
        """The text of the latest attempt: the replay so far while one is pending."""
        shown = self._text.value
        return shown if self._replayed is None else shown[: self._replayed]

    def restart(self, reason: str = "", model: str = "") -> None:
        self._replayed = 0 if len(self._text) else None
        self._reason, self._model = reason, model

    def extend(self, delta: str) -> bool:
        """Plain growth, recorded without a fact: True when no replay is pending (the facts of
        ``grow`` would be one ``SegmentGrown`` of ``delta``), else False and nothing recorded."""
        if self._replayed is not None:
            return False
        self._text.append(delta)
        return True

    def grow(self, delta: str) -> list[SegmentGrown | SegmentReset]:
        if not delta:
            return []
        at = self._replayed
        if at is None:
            self._text.append(delta)
            return [SegmentGrown(self.segment, self._text, delta)]
        shown = self._text.value
        if shown.startswith(delta, at):
            self._replayed = at + len(delta)  # the replay repeats what the client has
            return []
        same = common_prefix(delta, shown[at : at + len(delta)])
        self._replayed = None
        if at + same == len(shown):  # the replay caught up and goes further
            self._text.append(delta[same:])
            return [SegmentGrown(self.segment, self._text, delta[same:])]
        kept = at + same
        self._text = _Text(shown[:kept] + delta[same:])
        return [self._reset(kept, shown)]

    def settle(self) -> list[SegmentReset]:
        at, self._replayed = self._replayed, None
        shown = self._text.value
        if at is None or at == len(shown):
            return []
        self._text = _Text(shown[:at])
        return [self._reset(at, shown)]

    def _reset(self, kept: int, shown: str) -> SegmentReset:
        return SegmentReset(self.segment, self._text.value, kept, shown, self._reason, self._model)


def appended(item: Item) -> str:
    """What a client that cannot take text back (SSE) is sent for ``item``: growth as it comes;
    after a reset, the replay whole after a blank line (nothing, when the replay is empty)."""
    match item:
        case SegmentGrown(delta=delta):
            return delta
        case SegmentReset(text=text):
            return "\n\n" + text if text else ""
        case _:
            return ""


@dataclass
class _Open:
    track: Track
    ended: str | None = None  # SegmentEnded's text, until the next event says how it ended


class Segments:
    """The segment model of one turn: ``feed`` each event, in order; get its items."""

    def __init__(self) -> None:
        self._open: _Open | None = None
        self._count = 0
        self._last = ""  # the text of the last closed segment

    def feed(self, event: Event) -> list[Item]:
        out: list[Item] = []
        match event:
            case TurnEnded(text=text, reason=reason):
                ending: Ending = (
                    "interrupted"
                    if reason == "interrupted"
                    # Text open when the model called the client's tools accompanied them.
                    else "commentary"
                    if reason == "tool_calls"
                    else "answer"
                )
                out += self._end(text, ending)
                out.append(event)
            case TurnFailed(partial_text=partial):
                out += self._end(partial, "failed", prefer_closer=True)
                out.append(event)
            case _:
                out += self._settle()
                out += self._feed(event)
        return out

    @property
    def open_segment(self) -> int | None:
        """The number of the segment open now, if any."""
        return None if self._open is None else self._open.track.segment

    @property
    def settled(self) -> bool:
        """No segment waits to be closed by the next event: ``feed`` passes an event that is
        not segment text (a ``ToolCallDelta``, a ``ReasoningDelta``) through alone."""
        return self._open is None or self._open.ended is None

    def grew(self, delta: str) -> bool:
        """The fast lane of a ``TextDelta`` (a proxied stream's common case): when ``delta``
        only grows the open segment, it is recorded and True returned — ``feed`` would have
        given exactly ``[SegmentGrown(open_segment, ..., delta)]``, which a caller that reads
        only ``appended`` text need not build. Else False, nothing recorded: ``feed`` it."""
        seg = self._open
        return seg is not None and seg.ended is None and bool(delta) and seg.track.extend(delta)

    def _feed(self, event: Event) -> list[Item]:
        match event:
            case TextDelta(text=text):
                return self._grow(text)
            case Commentary(text=text):
                return self._close(text, "commentary")
            case SegmentEnded(text=text):
                out = self._finish(text)
                if self._open is not None:
                    self._open.ended = text
                return out
            case StreamReset(reason=reason, model=model):
                if self._open is not None:
                    self._open.track.restart(reason, model)
                return [event]
            case ToolStarted() | ToolProgress() | ToolEnded():
                # Text still open when tools run accompanied their calls.
                return [*self._close("", "commentary"), event]
            case ApprovalRequested() | ApprovalResolved():
                return [event]  # they follow the call's ToolStarted: the segment is closed
            case ElicitationRequested() | ElicitationResolved():
                return [event]  # during a call's run: the segment is closed
            case TurnStarted() | ReasoningDelta() | ToolCallDelta():
                # A client tool call forming leaves the segment open: the turn's end closes
                # it as commentary.
                return [event]
            case TurnEnded() | TurnFailed():
                raise AssertionError("terminal events are handled by feed")
            case _:
                assert_never(event)

    def _grow(self, delta: str) -> list[Item]:
        out: list[Item] = []
        if not delta:
            return out
        if self._open is None:
            self._open = _Open(Track(self._count))
            self._count += 1
            out.append(SegmentOpened(self._open.track.segment))
        out += self._open.track.grow(delta)
        return out

    def _finish(self, final: str) -> list[Item]:
        """Bring the open segment's text to ``final``, the closer's post-processed text: what it
        adds beyond the stream is growth; a replay that stopped short is a reset."""
        current = self._open.track.current if self._open is not None else ""
        out: list[Item] = []
        if len(final) > len(current) and final.startswith(current):
            out += self._grow(final[len(current) :])
        if self._open is not None:
            out += self._open.track.settle()
        return out

    def _close(self, final: str, ending: Ending) -> list[Item]:
        out = self._finish(final)
        seg, self._open = self._open, None
        if seg is None:
            return out
        shown = seg.track.shown
        text = final or shown
        self._last = text
        out.append(SegmentClosed(seg.track.segment, text, ending, shown))
        return out

    def _settle(self) -> list[Item]:
        """A SegmentEnded followed by anything but the turn's end closed an answer."""
        if self._open is None or self._open.ended is None:
            return []
        return self._close(self._open.ended, "answer")

    def _end(self, text: str, ending: Ending, *, prefer_closer: bool = False) -> list[Item]:
        """The turn ends: the open segment closes with ``text`` (the agent's final word), or a
        segment of its own carries a text no segment showed."""
        seg = self._open
        if seg is None:
            if not text or text == self._last:
                return []
            return [*self._grow(text), *self._close(text, ending)]
        closer = seg.ended or ""
        final = (closer or text) if prefer_closer else (text or closer)
        return self._close(final or seg.track.current, ending)


def segment_items(events: Iterable[Event]) -> list[Item]:
    """All items of a whole turn (tests and replays)."""
    segments = Segments()
    return [item for event in events for item in segments.feed(event)]

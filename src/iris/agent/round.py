"""One model round: raw provider deltas in, events out, and what the round produced.

Shared by every provider so that a provider file only parses its own wire format. Lone
surrogates in text and reasoning become U+FFFD here, so every surface gets valid text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from iris.agent.scrubber import ThinkScrubber
from iris.events import Event, ReasoningDelta, TextDelta, ToolCallDelta
from iris.formats.surrogates import SurrogateMender, clean
from iris.llm.provider import RawDelta, RawLimit, RawReasoning, RawText, RawToolCall, RawUsage


@dataclass
class ToolCall:
    id: str = ""
    name: str = ""
    arguments: str = ""
    streamed: int = -1  # its position in the round's streamed calls, once announced
    sent: str = ""  # the arguments its ToolCallDelta events carried


@dataclass(frozen=True)
class CallStream:
    """How a round streams the client's tool calls as they form (``ToolCallDelta``):
    ``call_id(position)`` names a call the provider gave no id; at most ``limit`` calls."""

    call_id: Callable[[int], str]
    limit: int | None = None


@dataclass
class RoundBuilder:
    raw_text: list[str] = field(default_factory=list[str])  # content as received (tags included)
    visible: list[str] = field(default_factory=list[str])  # what consumers were shown
    reasoning: list[str] = field(default_factory=list[str])
    calls: dict[int, ToolCall] = field(default_factory=dict[int, ToolCall])
    stream_calls: CallStream | None = None  # a round offering the client's own tools
    announced: list[ToolCall] = field(default_factory=list[ToolCall])  # streamed, in order
    input_tokens: int = 0
    output_tokens: int = 0
    limited: bool = False  # the provider stopped at its token limit
    _scrubber: ThinkScrubber = field(default_factory=ThinkScrubber)
    _text_mender: SurrogateMender = field(default_factory=SurrogateMender)
    _reasoning_mender: SurrogateMender = field(default_factory=SurrogateMender)
    _started: bool = False  # first non-whitespace visible character was emitted
    _summary: bool = False  # the reasoning being received is the provider's summary

    @property
    def emitted(self) -> bool:
        """Did a consumer see anything of this round (text, reasoning or a client tool call)?"""
        return bool(self.visible or self.reasoning or self.announced)

    @property
    def shown_text(self) -> str:
        return "".join(self.visible)

    def feed(self, raw: RawDelta) -> list[Event]:
        match raw:
            case RawText(text=text):
                return self._text(self._text_mender.feed(text))
            case RawReasoning(text=text, summary=summary):
                self._summary = summary
                return self._reasoning(self._reasoning_mender.feed(text))
            case RawToolCall():
                call = self.calls.setdefault(raw.index, ToolCall())
                if raw.id:
                    call.id = clean(raw.id)
                if raw.name:
                    call.name = clean(raw.name)
                arguments = clean(raw.arguments)
                call.arguments = arguments if raw.complete else call.arguments + arguments
                return self._call_fragment(call)
            case RawUsage(input_tokens=inp, output_tokens=out):
                self.input_tokens, self.output_tokens = inp, out
                return []
            case RawLimit():
                self.limited = True
                return []

    def finish(self) -> list[Event]:
        events = self._reasoning(self._reasoning_mender.flush())
        events += self._text(self._text_mender.flush())
        return events + self._scrubbed(*self._scrubber.flush())

    def _text(self, text: str) -> list[Event]:
        if not text:
            return []
        self.raw_text.append(text)
        return self._scrubbed(*self._scrubber.feed(text))

    def _reasoning(self, text: str) -> list[Event]:
        if not text:
            return []
        self.reasoning.append(text)
        return [ReasoningDelta(text, summary=self._summary)]

    def _scrubbed(self, visible: str, reasoning: str) -> list[Event]:
        events: list[Event] = []
        if reasoning:
            self.reasoning.append(reasoning)
            events.append(ReasoningDelta(reasoning))
        if not self._started:
            # Whitespace before the first word (often left after a think block) is never shown.
            visible = visible.lstrip()
            self._started = bool(visible)
        if visible:
            self.visible.append(visible)
            events.append(TextDelta(visible))
        return events

    def _call_fragment(self, call: ToolCall) -> list[Event]:
        """The ``ToolCallDelta`` a call's growth makes, when the round streams client calls:
        its head (id, name, the arguments so far) once the name is known, then each fragment."""
        stream = self.stream_calls
        if stream is None or not call.name:
            return []
        if call.streamed < 0:
            position = len(self.announced)
            if stream.limit is not None and position >= stream.limit:
                return []  # past max_tool_calls: never returned, so never shown
            call.streamed = position
            call.id = call.id or stream.call_id(position)
            self.announced.append(call)
            call.sent = call.arguments
            return [ToolCallDelta(position, call.arguments, call.id, call.name)]
        if not call.arguments.startswith(call.sent):
            # A provider's whole call that contradicts its own fragments: what went out cannot
            # be taken back; TurnEnded.tool_calls carries the call as the provider ended it.
            return []
        fragment = call.arguments[len(call.sent) :]
        if not fragment:
            return []
        call.sent = call.arguments
        return [ToolCallDelta(call.streamed, fragment)]

    def tool_calls(self) -> list[ToolCall]:
        """The round's calls: those streamed in the order they began, then the rest."""
        rest = [c for _, c in sorted(self.calls.items()) if c.name and c.streamed < 0]
        return [*self.announced, *rest]

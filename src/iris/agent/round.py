"""One model round: raw provider deltas in, events out, and what the round produced.

Shared by every provider so that a provider file only parses its own wire format. Lone
surrogates in text and reasoning become U+FFFD here, so every surface gets valid text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iris.agent.scrubber import ThinkScrubber
from iris.agent.surrogates import SurrogateMender, clean
from iris.events import Event, ReasoningDelta, TextDelta
from iris.llm.base import RawDelta, RawReasoning, RawText, RawToolCall, RawUsage


@dataclass
class ToolCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class RoundBuilder:
    raw_text: list[str] = field(default_factory=list[str])  # content as received (tags included)
    visible: list[str] = field(default_factory=list[str])  # what consumers were shown
    reasoning: list[str] = field(default_factory=list[str])
    calls: dict[int, ToolCall] = field(default_factory=dict[int, ToolCall])
    input_tokens: int = 0
    output_tokens: int = 0
    _scrubber: ThinkScrubber = field(default_factory=ThinkScrubber)
    _text_mender: SurrogateMender = field(default_factory=SurrogateMender)
    _reasoning_mender: SurrogateMender = field(default_factory=SurrogateMender)
    _started: bool = False  # first non-whitespace visible character was emitted
    _summary: bool = False  # the reasoning being received is the provider's summary

    @property
    def emitted(self) -> bool:
        """Did a consumer see anything of this round (text or reasoning)?"""
        return bool(self.visible or self.reasoning)

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
                return []
            case RawUsage(input_tokens=inp, output_tokens=out):
                self.input_tokens, self.output_tokens = inp, out
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

    def tool_calls(self) -> list[ToolCall]:
        return [call for _, call in sorted(self.calls.items()) if call.name]

"""Hypothesis strategies for agent event streams, shared by the surfaces' property tests.

``turns()`` draws a ``ScriptedTurn``: an event sequence the agent (``iris.agent.core``) can
produce, and the segments it should leave (ending and final text), worked out from how it was
drawn rather than by the segment model. What the agent guarantees, and the strategy keeps:

- visible text never starts with whitespace (the round builder strips it); a closer carries the
  text post-processed (``strip()`` here: the streamed text has no think tags left);
- a round may be restarted (fallback, retry) after showing part of an attempt: ``StreamReset``
  comes only when the attempt showed something (text or reasoning); the next attempt may repeat
  the shown text, repeat a prefix of it, go further, or say something else;
- a round's text closes with ``Commentary`` when tool calls follow and ``SegmentEnded``
  otherwise, only when it is not empty; the closer may carry text the stream held back;
- the turn ends once: ``stop``, ``tool_calls`` (client tools), ``max_iterations``, ``length``
  and ``interrupted`` (cut mid-text: ``SegmentEnded(partial)`` first; or cut during a tool), or
  ``TurnFailed`` with ``partial_text``.

``split_deltas`` chunks a text into deltas; ``words`` is the small alphabet that makes replays
collide with what was shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hypothesis import strategies as st

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

Ending = Literal["answer", "commentary", "interrupted", "failed"]
Finish = Literal[
    "stop", "tool_calls", "max_iterations", "length", "interrupted", "in_tool", "failed"
]

USAGE = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
NOTE = "earlier conversation dropped"

words = st.text(alphabet="ab \n", min_size=1, max_size=5)


@dataclass
class ScriptedTurn:
    events: list[Event] = field(default_factory=list[Event])
    # Each text segment the user should be left with: how it ended and its final text.
    segments: list[tuple[Ending, str]] = field(default_factory=list[tuple[Ending, str]])


@st.composite
def split_deltas(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` as a list of non-empty deltas, cut at random places."""
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=6)))
    bounds = [0, *(c for c in cuts if c < len(text)), len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if text[a:b]]


@st.composite
def _attempt_text(draw: st.DrawFn, before: str) -> str:
    """What a restarted attempt says, given what the one before it said in full."""
    how = draw(st.sampled_from(["new", "same", "further", "prefix"] if before else ["new"]))
    if how == "same":
        text = before
    elif how == "further":
        text = before + draw(words)
    elif how == "prefix":
        text = before[: draw(st.integers(0, len(before)))]
    else:
        text = "".join(draw(st.lists(words, max_size=4)))
    return text.lstrip()


@st.composite
def turns(draw: st.DrawFn, max_rounds: int = 3) -> ScriptedTurn:
    turn = ScriptedTurn([TurnStarted("t1", "m")])
    events = turn.events
    finish: Finish = draw(
        st.sampled_from(
            ["stop", "tool_calls", "max_iterations", "length", "interrupted", "in_tool", "failed"]
        )
    )
    rounds = draw(st.integers(1, max_rounds))
    tool = 0
    last_text = ""
    for r in range(rounds):
        last = r == rounds - 1
        cut_short = last and finish in ("length", "interrupted", "failed")
        with_tools = not last or finish in ("tool_calls", "max_iterations", "in_tool")
        if draw(st.integers(0, 9)) == 0:  # the context was compacted (iris room only)
            events.append(Commentary(NOTE))
            turn.segments.append(("commentary", NOTE))
        attempts = draw(st.integers(1, 3))
        full = ""
        streamed = ""
        shown_any = False  # some attempt of this round showed text
        for a in range(attempts):
            final_attempt = a == attempts - 1
            full = draw(_attempt_text(full))
            reasoning = draw(st.lists(words, max_size=2))
            if final_attempt and not cut_short:
                # The closer may carry text the stream held back.
                held = draw(st.integers(0, 2)) == 0
                streamed = full[: draw(st.integers(0, len(full)))] if held else full
            else:
                streamed = full[: draw(st.integers(0, len(full)))]
            events.extend(ReasoningDelta(w) for w in reasoning)
            events.extend(TextDelta(d) for d in draw(split_deltas(streamed)))
            shown_any = shown_any or bool(streamed)
            if not final_attempt and (reasoning or streamed):
                events.append(StreamReset("falling back to b", "b"))
        if cut_short:
            partial = streamed.strip()
            if partial:
                events.append(SegmentEnded(partial))
            if partial or shown_any:
                ending: Ending = (
                    "failed"
                    if finish == "failed"
                    else ("interrupted" if finish == "interrupted" else "answer")
                )
                turn.segments.append((ending, partial))
            if finish == "failed":
                events.append(TurnFailed("upstream_error", "the provider failed", True, partial))
            else:
                events.append(TurnEnded(partial, model="m", usage=USAGE, reason=finish))
            return turn
        text = full.strip()
        last_text = text
        if text:
            events.append(Commentary(text) if with_tools else SegmentEnded(text))
            turn.segments.append(("commentary" if with_tools else "answer", text))
        elif shown_any:  # shown, then replaced by an attempt that said nothing
            turn.segments.append(("commentary" if with_tools else "answer", ""))
        if not with_tools:
            events.append(TurnEnded(text, model="m", usage=USAGE))
            return turn
        if last and finish == "tool_calls":
            call = {"id": "call_1", "name": "get_weather", "arguments": "{}"}
            events.append(
                TurnEnded(text, model="m", usage=USAGE, reason="tool_calls", tool_calls=[call])
            )
            return turn
        for _ in range(draw(st.integers(1, 2))):
            tool += 1
            events.append(ToolStarted(tool, "terminal", {"command": "ls"}, f"c{tool}"))
            if last and finish == "in_tool":
                events.append(TurnEnded("", model="m", usage=USAGE, reason="interrupted"))
                return turn
            events.extend(
                ToolProgress(tool, "terminal", "…") for _ in range(draw(st.integers(0, 1)))
            )
            events.append(ToolEnded(tool, "terminal", draw(st.booleans()), 0.1, "out"))
    events.append(TurnEnded(last_text, model="m", usage=USAGE, reason="max_iterations"))
    return turn

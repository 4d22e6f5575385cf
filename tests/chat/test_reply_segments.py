"""The chat reply against the segment model: whatever turn the agent produces, what the chat
finally shows is the segment model's final text of each segment, never doubled, never a reset
missed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from iris.events import (
    Event,
    SegmentEnded,
    StreamReset,
    TextDelta,
    ToolEnded,
    ToolStarted,
    TurnEnded,
)
from tests.chat.sim import EMPTY, display, final_texts, shown_texts, simulate, visible
from tests.strategies import ScriptedTurn, turns


@settings(max_examples=300, deadline=None)
@given(
    turn=turns(),
    every=st.sampled_from([0.01, 0.1, 1.0]),
    preview=st.booleans(),
    min_tokens=st.integers(1, 3),
)
def test_the_chat_finally_shows_the_segment_models_text(
    turn: ScriptedTurn, every: float, preview: bool, min_tokens: int
) -> None:
    timeline = [(i * every, event) for i, event in enumerate(turn.events)]
    shown = display(tool_progress="off", min_tokens=min_tokens)
    result = simulate(timeline, shown=shown, preview=preview)
    assert shown_texts(result.chat(), turn.events) == final_texts(turn.events)
    assert final_texts(turn.events) == [text for _, text in turn.segments if text]


def test_a_replay_that_repeats_the_shown_text_never_takes_it_back() -> None:
    timeline: list[tuple[float, Event]] = [
        (0.0, TextDelta("Hello ")),
        (0.1, TextDelta("wor")),
        (2.0, StreamReset("falling back to b", "b")),
        (2.1, TextDelta("Hello ")),
        (5.0, TextDelta("world")),
        (6.0, SegmentEnded("Hello world")),
        (6.0, TurnEnded("Hello world")),
    ]
    result = simulate(timeline, shown=display(min_tokens=1))
    shown = [visible(call.text) for call in result.ok_calls()]
    assert all(b.startswith(a) for a, b in zip(shown, shown[1:], strict=False)), shown
    assert result.chat() == ["Hello world"]


def test_a_replay_that_diverges_shows_the_new_text_from_where_it_differs() -> None:
    timeline: list[tuple[float, Event]] = [
        (0.0, TextDelta("Hello ")),
        (0.1, TextDelta("world")),
        (2.0, StreamReset("falling back to b", "b")),
        (2.1, TextDelta("Hello ")),
        (2.2, TextDelta("there")),
        (6.0, SegmentEnded("Hello there")),
        (6.0, TurnEnded("Hello there")),
    ]
    result = simulate(timeline, shown=display(min_tokens=1))
    # The replay repeated "Hello " (nothing to redo), then diverged: one edit to the new text.
    shown = [visible(call.text) for call in result.ok_calls()]
    assert shown == ["Hello ", "Hello world", "Hello there", "Hello there"]


def test_text_taken_back_while_its_message_was_on_the_way_leaves_no_cursor() -> None:
    # "a" goes out with the cursor; before the platform answers, a fallback drops it and the
    # round ends in tools without saying anything: the message must not keep "a ▌".
    timeline: list[tuple[float, Event]] = [
        (0.0, TextDelta("a")),
        (0.01, StreamReset("falling back to b", "b")),
        (0.02, ToolStarted(1, "terminal", {"command": "ls"}, "c1")),
        (0.03, ToolEnded(1, "terminal", True, 0.1, "out")),
        (0.04, TextDelta("Done.")),
        (0.05, SegmentEnded("Done.")),
        (0.05, TurnEnded("Done.")),
    ]
    result = simulate(timeline, shown=display(tool_progress="off", min_tokens=1))
    assert result.chat() == [EMPTY, "Done."]

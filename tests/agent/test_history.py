"""The one rule for what a turn leaves in the history, for each way a turn ends."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings

from iris.agent.history import MARK, cut_reply, kept
from iris.events import TurnEnded, TurnFailed
from iris.segments import SegmentClosed, segment_items
from tests.strategies import ScriptedTurn, turns

CALL: dict[str, Any] = {
    "role": "assistant",
    "content": "Looking.",
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    ],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "file text"}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def test_a_complete_turn_leaves_every_message_it_added() -> None:
    end = TurnEnded("Done.", messages=[CALL, RESULT, assistant("Done.")])
    assert kept(end) == [CALL, RESULT, assistant("Done.")]


def test_a_complete_turn_whose_end_lists_no_messages_leaves_its_answer() -> None:
    assert kept(TurnEnded("Done.")) == [assistant("Done.")]
    assert kept(TurnEnded("")) == []
    calls = [{"id": "c1", "name": "read", "arguments": "{}"}]
    assert kept(TurnEnded("Looking.", reason="tool_calls", tool_calls=calls)) == [CALL]


def test_an_interrupted_turn_leaves_the_shown_text_marked_as_cut() -> None:
    end = TurnEnded(
        "The sky is bl", reason="interrupted", messages=[CALL, RESULT, assistant("The sky is bl")]
    )
    assert kept(end) == [CALL, RESULT, assistant(f"The sky is bl\n\n{MARK}")]


def test_a_turn_interrupted_during_a_tool_leaves_the_call_answered_and_no_reply() -> None:
    cut = {"role": "tool", "tool_call_id": "c1", "content": MARK}
    assert kept(TurnEnded("", reason="interrupted", messages=[CALL, cut])) == [CALL, cut]
    assert kept(TurnEnded("", reason="interrupted")) == []


def test_a_failed_turn_leaves_what_it_showed_marked_as_cut() -> None:
    end = TurnFailed("x", "boom", partial_text="Half", messages=[CALL, RESULT, assistant("Half")])
    assert kept(end) == [CALL, RESULT, assistant(f"Half\n\n{MARK}")]
    # An end made outside the agent (a surface's own failure) has only the text.
    assert kept(TurnFailed("x", "boom", partial_text="Half")) == [assistant(f"Half\n\n{MARK}")]
    assert kept(TurnFailed("x", "boom")) == []


def test_a_crashed_turn_leaves_the_text_the_user_was_shown() -> None:
    assert kept(None, "The sky is bl") == [cut_reply("The sky is bl")]
    assert kept(None) == []
    # What the surface showed fills in only for an end that has no record of its own.
    assert kept(TurnFailed("x", "boom"), "shown") == [cut_reply("shown")]
    assert kept(TurnFailed("x", "boom", partial_text="Half"), "shown") == [cut_reply("Half")]


@settings(max_examples=200, deadline=None)
@given(turns())
def test_the_history_keeps_a_cut_reply_as_the_segment_model_closed_it(turn: ScriptedTurn) -> None:
    # What the user was left seeing of a reply cut short (the segment model's final text) is
    # what the model will read of it, marked; a reply that was not cut is never marked.
    cut = [
        item.text
        for item in segment_items(turn.events)
        if isinstance(item, SegmentClosed) and item.ending in ("interrupted", "failed")
    ]
    end = turn.events[-1]
    assert isinstance(end, TurnEnded | TurnFailed)
    left = kept(end)
    if cut and cut[-1]:
        assert left[-1] == cut_reply(cut[-1])
    else:
        assert not any(MARK in str(message["content"]) for message in left)

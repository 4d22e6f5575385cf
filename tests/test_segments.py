"""The segment model: event lists in, segment facts out; and what any surface must show."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iris.events import (
    Commentary,
    Event,
    ReasoningDelta,
    SegmentEnded,
    StreamReset,
    TextDelta,
    ToolEnded,
    ToolStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.segments import (
    Item,
    SegmentClosed,
    SegmentGrown,
    SegmentOpened,
    SegmentReset,
    Track,
    appended,
    segment_items,
)
from tests.strategies import ScriptedTurn, split_deltas, turns, words

START = TurnStarted("t", "m")


def facts(events: list[Event]) -> list[Item]:
    """The items that are not events passed through."""
    return [
        item
        for item in segment_items(events)
        if isinstance(item, SegmentOpened | SegmentGrown | SegmentReset | SegmentClosed)
    ]


# -- helpers for every surface's property ----------------------------------------------------


def closed(events: list[Event]) -> list[SegmentClosed]:
    """The segments of the turn as the model closes them (their ``text`` is what a surface that
    can replace text must end up showing)."""
    return [item for item in segment_items(events) if isinstance(item, SegmentClosed)]


def appended_texts(events: list[Event]) -> list[str]:
    """Per segment, what a surface that cannot take text back (SSE, a terminal's stdout) ends up
    having shown: the model's growth, and after a reset the replay after a blank line."""
    texts: list[str] = []
    for item in segment_items(events):
        if isinstance(item, SegmentOpened):
            texts.append("")
        elif isinstance(item, SegmentGrown | SegmentReset):
            texts[item.segment] += appended(item)
    return texts


def assert_appended_shows_the_final_text(seen: str, segment: SegmentClosed, reset: bool) -> None:
    """What an append-only surface shows for a segment ends with the model's final text (modulo
    the whitespace post-processing trims), and holds it once unless a replay diverged."""
    assert seen.rstrip().endswith(segment.text.rstrip()) or not segment.text, (seen, segment)
    if not reset:
        assert seen == segment.shown and seen.strip() == segment.text, (seen, segment)


# -- the lifecycle ---------------------------------------------------------------------------


def test_a_streamed_answer_opens_grows_and_closes_with_the_turns_text() -> None:
    events: list[Event] = [
        START,
        TextDelta("Hel"),
        TextDelta("lo "),
        SegmentEnded("Hello"),
        TurnEnded("Hello"),
    ]
    assert facts(events) == [
        SegmentOpened(0),
        SegmentGrown(0, "Hel", "Hel"),
        SegmentGrown(0, "Hello ", "lo "),
        SegmentClosed(0, "Hello", "answer", "Hello "),
    ]


def test_other_events_pass_through_in_order() -> None:
    tool = ToolStarted(1, "terminal", {"command": "ls"})
    end = TurnEnded("b")
    events: list[Event] = [
        START,
        ReasoningDelta("hmm"),
        TextDelta("a"),
        Commentary("a"),
        tool,
        ToolEnded(1, "terminal", True, 0.1, "x"),
        TextDelta("b"),
        SegmentEnded("b"),
        end,
    ]
    kinds = [type(item).__name__ for item in segment_items(events)]
    assert kinds == [
        "TurnStarted",
        "ReasoningDelta",
        "SegmentOpened",
        "SegmentGrown",
        "SegmentClosed",
        "ToolStarted",
        "ToolEnded",
        "SegmentOpened",
        "SegmentGrown",
        "SegmentClosed",
        "TurnEnded",
    ]
    items = segment_items(events)
    assert items[5] is tool and items[-1] is end
    assert [c.ending for c in closed(events)] == ["commentary", "answer"]
    assert [c.segment for c in closed(events)] == [0, 1]


def test_a_replay_that_repeats_the_shown_text_reports_only_what_is_new() -> None:
    events: list[Event] = [
        START,
        TextDelta("Hello "),
        TextDelta("wor"),
        StreamReset("fallback", "b"),
        TextDelta("Hello"),
        TextDelta(" world!"),
        SegmentEnded("Hello world!"),
        TurnEnded("Hello world!"),
    ]
    assert facts(events) == [
        SegmentOpened(0),
        SegmentGrown(0, "Hello ", "Hello "),
        SegmentGrown(0, "Hello wor", "wor"),
        SegmentGrown(0, "Hello world!", "ld!"),
        SegmentClosed(0, "Hello world!", "answer", "Hello world!"),
    ]
    assert StreamReset("fallback", "b") in segment_items(events), "passed through for reasoning"


def test_a_diverging_replay_resets_to_the_common_prefix() -> None:
    events: list[Event] = [
        START,
        TextDelta("Hello wor"),
        StreamReset("fallback", "b"),
        TextDelta("Hello"),
        TextDelta(" there"),
        SegmentEnded("Hello there"),
        TurnEnded("Hello there"),
    ]
    assert facts(events) == [
        SegmentOpened(0),
        SegmentGrown(0, "Hello wor", "Hello wor"),
        SegmentReset(0, "Hello there", 6, "Hello wor", "fallback", "b"),
        SegmentClosed(0, "Hello there", "answer", "Hello there"),
    ]
    assert appended_texts(events) == ["Hello wor\n\nHello there"]


def test_a_replay_that_stops_short_is_a_reset_at_the_close() -> None:
    events: list[Event] = [
        START,
        TextDelta("Hello world"),
        StreamReset("retry"),
        TextDelta("Hello"),
        SegmentEnded("Hello"),
        TurnEnded("Hello"),
    ]
    assert facts(events)[2:] == [
        SegmentReset(0, "Hello", 5, "Hello world", "retry"),
        SegmentClosed(0, "Hello", "answer", "Hello"),
    ]
    assert appended_texts(events) == ["Hello world\n\nHello"]


def test_a_reset_before_any_text_reports_nothing() -> None:
    events: list[Event] = [
        START,
        ReasoningDelta("a"),
        StreamReset("retry"),
        TextDelta("Hi"),
        SegmentEnded("Hi"),
        TurnEnded("Hi"),
    ]
    assert not any(isinstance(f, SegmentReset) for f in facts(events))
    assert appended_texts(events) == ["Hi"]


def test_text_the_stream_held_back_is_growth_before_the_close() -> None:
    events: list[Event] = [START, TextDelta("Hi"), SegmentEnded("Hi there"), TurnEnded("Hi there")]
    assert facts(events)[2:] == [
        SegmentGrown(0, "Hi there", " there"),
        SegmentClosed(0, "Hi there", "answer", "Hi there"),
    ]


def test_held_back_text_after_a_repeating_replay_is_still_shown() -> None:
    events: list[Event] = [
        START,
        TextDelta("Hel"),
        StreamReset("retry"),
        TextDelta("Hel"),
        SegmentEnded("Hello"),
        TurnEnded("Hello"),
    ]
    assert appended_texts(events) == ["Hello"]


def test_an_interrupted_segment_closes_as_interrupted_with_the_partial_text() -> None:
    events: list[Event] = [
        START,
        TextDelta("Partial ans"),
        SegmentEnded("Partial ans"),
        TurnEnded("Partial ans", reason="interrupted"),
    ]
    assert closed(events) == [SegmentClosed(0, "Partial ans", "interrupted", "Partial ans")]


def test_an_interrupt_with_no_closer_keeps_what_was_shown() -> None:
    events: list[Event] = [START, TextDelta("Parti"), TurnEnded("", reason="interrupted")]
    assert closed(events) == [SegmentClosed(0, "Parti", "interrupted", "Parti")]


def test_a_failure_closes_as_failed_with_the_partial_text() -> None:
    events: list[Event] = [
        START,
        TextDelta("Some "),
        SegmentEnded("Some"),
        TurnFailed("upstream_error", "502", True, "Some"),
    ]
    assert closed(events) == [SegmentClosed(0, "Some", "failed", "Some ")]
    events = [START, TextDelta("Hel"), TurnFailed("rate_limited", "slow down")]
    assert closed(events) == [SegmentClosed(0, "Hel", "failed", "Hel")]


def test_a_failure_after_a_reset_keeps_nothing_of_the_dropped_attempt() -> None:
    events: list[Event] = [
        START,
        TextDelta("Hello"),
        StreamReset("falling back to b", "b"),
        TurnFailed("upstream_error", "all failed", True, ""),
    ]
    assert facts(events)[2:] == [
        SegmentReset(0, "", 0, "Hello", "falling back to b", "b"),
        SegmentClosed(0, "", "failed", ""),
    ]
    assert appended_texts(events) == ["Hello"]


def test_an_answer_given_only_in_turn_ended_is_a_segment() -> None:
    assert facts([START, TurnEnded("Just this")]) == [
        SegmentOpened(0),
        SegmentGrown(0, "Just this", "Just this"),
        SegmentClosed(0, "Just this", "answer", "Just this"),
    ]


def test_turn_ended_repeating_the_last_commentary_adds_no_segment() -> None:
    events: list[Event] = [
        START,
        TextDelta("Checking."),
        Commentary("Checking."),
        TurnEnded("Checking.", reason="tool_calls"),
    ]
    assert [c.ending for c in closed(events)] == ["commentary"]


def test_an_unstreamed_commentary_is_a_whole_segment() -> None:
    events: list[Event] = [START, Commentary("note"), TurnEnded("")]
    assert facts(events) == [
        SegmentOpened(0),
        SegmentGrown(0, "note", "note"),
        SegmentClosed(0, "note", "commentary", "note"),
    ]


def test_text_still_open_when_a_tool_starts_is_commentary() -> None:
    events: list[Event] = [START, TextDelta("Let me look"), ToolStarted(1, "ls", {}), TurnEnded("")]
    assert closed(events) == [SegmentClosed(0, "Let me look", "commentary", "Let me look")]


def test_a_segment_ended_followed_by_more_text_closed_an_answer() -> None:
    events: list[Event] = [
        START,
        TextDelta("a"),
        SegmentEnded("a"),
        ReasoningDelta("r"),
        TextDelta("b"),
        SegmentEnded("b"),
        TurnEnded("b"),
    ]
    kinds = [type(item).__name__ for item in segment_items(events)]
    assert kinds.index("SegmentClosed") < kinds.index("ReasoningDelta")
    assert [(c.ending, c.text) for c in closed(events)] == [("answer", "a"), ("answer", "b")]


def test_grown_text_is_read_lazily_but_stays_what_it_was() -> None:
    track = Track()
    first = track.grow("ab")
    track.grow("cd")
    assert first == [SegmentGrown(0, "ab", "ab")]
    assert repr(first[0]) == "SegmentGrown(segment=0, text='ab', delta='ab')"


# -- properties over every turn the agent can produce -----------------------------------------


@given(turns())
def test_the_model_closes_every_segment_the_turn_left(turn: ScriptedTurn) -> None:
    assert [(c.ending, c.text) for c in closed(turn.events)] == turn.segments


@given(turns())
def test_facts_are_well_formed_and_pass_every_other_event_through(turn: ScriptedTurn) -> None:
    items = segment_items(turn.events)
    text_events = (TextDelta, Commentary, SegmentEnded)
    passed = [item for item in items if not isinstance(item, SegmentOpened | SegmentGrown)]
    passed = [item for item in passed if not isinstance(item, SegmentReset | SegmentClosed)]
    assert passed == [e for e in turn.events if not isinstance(e, text_events)]
    snapshot: dict[int, str] = {}
    done: set[int] = set()
    for item in items:
        match item:
            case SegmentOpened(segment=n):
                assert n == len(snapshot) and n not in done
                snapshot[n] = ""
            case SegmentGrown(segment=n, text=text, delta=delta):
                assert n not in done and delta and text == snapshot[n] + delta
                snapshot[n] = text
            case SegmentReset(segment=n, text=text, kept=kept, shown=shown):
                assert n not in done and shown == snapshot[n] and kept < len(shown)
                assert text[:kept] == shown[:kept] and text[kept : kept + 1] != shown[kept]
                snapshot[n] = text
            case SegmentClosed(segment=n, shown=shown, text=text):
                assert n not in done and shown == snapshot[n]
                assert shown.strip() == text
                done.add(n)
            case _:
                pass
    assert done == set(snapshot), "every opened segment is closed"


@given(turns())
def test_an_append_only_surface_sees_each_final_text_once(turn: ScriptedTurn) -> None:
    items = segment_items(turn.events)
    seen = appended_texts(turn.events)
    reset = {item.segment for item in items if isinstance(item, SegmentReset)}
    for segment in closed(turn.events):
        assert_appended_shows_the_final_text(
            seen[segment.segment], segment, segment.segment in reset
        )


@given(st.text(max_size=30), st.integers(0, 30), st.text(max_size=30), st.data())
def test_a_replay_never_duplicates_what_was_sent(
    prefix: str, cut: int, extra: str, data: st.DataObject
) -> None:
    """Whatever was shown before a reset, and however the replay is chunked, a replay that
    agrees with it adds exactly the unseen suffix."""
    full = prefix + extra
    track = Track()
    sent = "".join(appended(f) for f in track.grow(full[:cut]))
    track.restart()
    for delta in data.draw(split_deltas(full)):
        sent += "".join(appended(f) for f in track.grow(delta))
    sent += "".join(appended(f) for f in track.settle())
    assert sent == full


@given(st.lists(words, min_size=1, max_size=5), st.lists(words, max_size=5))
def test_a_diverging_replay_is_sent_whole_after_a_blank_line(
    first: list[str], second: list[str]
) -> None:
    track = Track()
    shown = "".join(first)
    replay = "".join(second)
    sent = "".join(appended(f) for w in first for f in track.grow(w))
    track.restart()
    sent += "".join(appended(f) for w in second for f in track.grow(w))
    sent += "".join(appended(f) for f in track.settle())
    if replay.startswith(shown):
        assert sent == replay
    elif shown.startswith(replay) and replay:
        assert sent == shown + "\n\n" + replay
    elif not replay:
        assert sent == shown
    else:
        assert sent == shown + "\n\n" + replay
    assert track.shown == replay or (replay.startswith(shown) and track.shown == replay)

"""The consumer's decisions on a virtual clock: what the user sees, when, and how often."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
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
)
from iris.surfaces.chat.budget import RateBudget
from iris.surfaces.chat.platforms.base import Capabilities
from iris.surfaces.chat.reply import CURSOR
from iris.surfaces.chat.splitter import measure
from tests.chat.sim import (
    TELEGRAM,
    Failed,
    Outcome,
    RateLimited,
    SimResult,
    deltas,
    display,
    simulate,
    visible,
)

Timeline = list[tuple[float, Event]]


def reply_of(words: list[str], *, every: float = 0.025, final: str | None = None) -> Timeline:
    events = deltas(words, every=every)
    end = events[-1][0] + 0.01 if events else 0.0
    text = "".join(words) if final is None else final
    return [*events, (end, SegmentEnded(text)), (end, TurnEnded(text))]


def words(n: int) -> list[str]:
    return [f"w{i} " for i in range(n)]


def assert_within_budget(result: SimResult, budget: RateBudget) -> None:
    times = [c.t for c in result.calls]
    for i, start in enumerate(times):
        inside = [t for t in times[i:] if t < start + budget.per_seconds]
        assert len(inside) <= budget.capacity, (
            f"{len(inside)} calls in {budget.per_seconds}s from {start}"
        )


@pytest.mark.parametrize(
    ("threshold", "pace"),
    [
        (100_000, 1.5),  # out of reach: edit_interval (1.5 s) apart
        (24, TELEGRAM.rate.spacing),  # 24 new characters wait at once: the budget's pace
    ],
)
def test_the_reply_grows_in_one_message_paced_by_the_interval_and_the_budget(
    threshold: int, pace: float
) -> None:
    shown = display(buffer_threshold=threshold)
    result = simulate(reply_of(words(400)), shown=shown)  # 10 s of text at 40 deltas/s
    calls = result.calls
    assert [c.kind for c in calls].count("send") == 1
    edits = [c for c in calls if c.kind == "edit"]
    assert len(edits) >= 10 / pace - 2
    gaps = [b.t - a.t for a, b in zip(calls, calls[1:], strict=False)]
    assert min(gaps) >= pace - 1e-9
    assert_within_budget(result, TELEGRAM.rate)
    assert all(c.text.endswith(CURSOR) for c in calls[:-1])
    assert result.chat() == ["".join(words(400))]


def test_a_group_chat_stays_under_twenty_calls_a_minute() -> None:
    result = simulate(reply_of(words(3000)), budget=RateBudget(20, 60.0))
    assert_within_budget(result, RateBudget(20, 60.0))
    assert "".join(result.chat()) == "".join(words(3000))


def test_nothing_is_shown_before_min_tokens_deltas() -> None:
    events = deltas(words(10), every=0.5)
    result = simulate(
        [*events, (6.0, SegmentEnded("done")), (6.0, TurnEnded("done"))],
        shown=display(min_tokens=5),
    )
    assert result.calls[0].t >= 2.0  # the 5th delta arrives at 2.0 s
    assert result.calls[0].text == "w0 w1 w2 w3 w4 " + CURSOR


def test_a_short_reply_is_one_send_without_cursor_and_no_edit() -> None:
    result = simulate(reply_of(["Hi", " there"]), shown=display(min_tokens=20))
    assert [(c.kind, c.text) for c in result.calls] == [("send", "Hi there")]


def test_the_final_edit_carries_the_post_processed_text_and_no_duplicate() -> None:
    result = simulate(reply_of(words(100), final="Cleaned answer."))
    assert result.chat() == ["Cleaned answer."]
    assert [c.kind for c in result.calls].count("send") == 1


def test_unchanged_text_is_never_sent_again() -> None:
    # Text stops for 10 s mid-reply: no edit repeats what is already shown.
    events = [*deltas(words(50)), *deltas(words(5), start=12.0)]
    text = "".join(words(50) + words(5))
    result = simulate([*events, (13.0, SegmentEnded(text)), (13.0, TurnEnded(text))])
    for a, b in zip(result.calls, result.calls[1:], strict=False):
        assert not (a.message_id == b.message_id and a.text == b.text)
    assert result.chat() == [text]


def test_a_429_is_honoured_and_the_reply_still_completes() -> None:
    result = simulate(reply_of(words(400)), outcomes=[None, RateLimited(5.0)])
    failed = result.calls[1]
    assert not failed.ok
    nxt = result.calls[2]
    assert nxt.t >= failed.t + 5.0  # nothing during retry_after
    assert nxt.t - failed.t >= 5.0
    assert result.chat() == ["".join(words(400))]


def test_after_repeated_429s_editing_stops_and_the_unseen_remainder_comes_at_the_end() -> None:
    text = "".join(words(1200))  # 30 s: the preview fails three times while streaming
    result = simulate(reply_of(words(1200)), outcomes=[None, *[RateLimited(1.0)] * 3])
    sends = [c for c in result.calls if c.kind == "send"]
    first_seen = visible(sends[0].text)
    assert text.startswith(first_seen)
    remainder = "".join(c.text for c in sends[1:])
    assert remainder == text[len(first_seen) :]  # the unseen remainder only, nothing twice
    assert all(c.t >= 29.0 for c in sends[1:])  # delivered at the end, not while streaming
    assert [c.kind for c in result.calls[4:]].count("edit") == 0  # editing stopped
    # The cursor left behind is cleared by one best-effort edit.
    assert result.chat() == [first_seen, *(c.text for c in sends[1:])]


def test_a_send_whose_answer_was_lost_is_not_sent_again() -> None:
    text = "".join(words(100))
    result = simulate(reply_of(words(100)), outcomes=[Failed(maybe_landed=True)])
    sends = [c for c in result.calls if c.kind == "send"]
    first = visible(sends[0].text)
    assert len(sends) == 2 and sends[1].text == text[len(first) :]


def test_a_long_reply_continues_in_new_messages_within_the_limit() -> None:
    long_words = [f"word{i} " for i in range(2500)] + ["😀" * 300]
    text = "".join(long_words)
    result = simulate(reply_of(long_words, every=0.005))
    chat = result.chat()
    assert len(chat) >= 5
    assert all(measure(m, "utf16") <= 4096 for m in chat)
    assert "".join(chat) == text
    assert not any(m.endswith(CURSOR) for m in chat)


def tool_turn() -> Timeline:
    t = 0.0
    events: Timeline = [(t, TextDelta("Let me look.")), (0.1, Commentary("Let me look."))]
    for i, (name, arg) in enumerate(
        [("terminal", "ls"), ("terminal", "pwd"), ("read_file", "a.txt")], 1
    ):
        events.append((0.2 + i, ToolStarted(i, name, {"arg": arg})))
        events.append((0.7 + i, ToolEnded(i, name, True, 0.5, f"out{i}")))
    answer = "".join(words(30))
    events += [(5.0 + i * 0.02, TextDelta(w)) for i, w in enumerate(words(30))]
    events += [(6.0, SegmentEnded(answer)), (6.0, TurnEnded(answer))]
    return events


@pytest.mark.parametrize(
    ("mode", "tools_message"),
    [
        ("off", None),
        ("new", "🔧 terminal\n🔧 read_file"),
        ("all", "🔧 terminal: ls\n🔧 terminal: pwd\n🔧 read_file: a.txt"),
        ("verbose", '🔧 terminal({"arg": "ls"})\n   ✓ 0.5s: out1\n🔧 terminal({"arg": "pwd"})'),
    ],
)
def test_tool_progress_modes(mode: str, tools_message: str | None) -> None:
    result = simulate(tool_turn(), shown=display(tool_progress=mode))
    chat = result.chat()
    answer = "".join(words(30))
    assert chat[0] == "Let me look."  # commentary is its own message
    assert chat[-1] == answer
    if tools_message is None:
        assert len(chat) == 2
    else:
        assert len(chat) == 3
        assert chat[1].startswith(tools_message)
    # Tool calls produce no text edits: the commentary message is final before any tool line.
    commentary_calls = [c for c in result.calls if c.message_id == "1"]
    assert all(not c.text.endswith(CURSOR) for c in commentary_calls[-1:])


def test_tool_progress_is_edited_in_place_under_the_budget() -> None:
    result = simulate(tool_turn(), shown=display(tool_progress="all"))
    tool_calls = [c for c in result.calls if c.message_id == "2"]
    assert [c.kind for c in tool_calls][0] == "send"
    assert all(c.kind == "edit" for c in tool_calls[1:])
    assert_within_budget(result, TELEGRAM.rate)


def test_a_platform_that_cannot_edit_gets_each_message_once_with_transport_final() -> None:
    caps = Capabilities(
        can_edit=False, max_length=4096, length_unit="chars", rate=RateBudget(1, 1.0)
    )
    shown = display(tool_progress="all", transport="final")
    result = simulate(tool_turn(), caps=caps, shown=shown)
    assert all(c.kind == "send" for c in result.calls)
    assert result.chat() == [
        "Let me look.",
        "🔧 terminal: ls\n🔧 terminal: pwd\n🔧 read_file: a.txt",
        "".join(words(30)),
    ]


def test_streaming_off_sends_the_whole_reply_once() -> None:
    result = simulate(reply_of(words(200)), preview=False)
    assert [(c.kind, c.text) for c in result.calls] == [("send", "".join(words(200)))]


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        ("code", "💭 **Reasoning:**\n```\nthink hard\n```\n\nThe answer."),
        ("blockquote", "> 💭 **Reasoning:**\n> think hard\n\nThe answer."),
        ("subtext", "-# 💭 Reasoning\n-# think hard\n\nThe answer."),
    ],
)
def test_reasoning_is_prepended_to_the_final_message_only(style: str, expected: str) -> None:
    events: Timeline = [(0.0, ReasoningDelta("think hard"))]
    events += deltas(["The", " answer", "."] * 1, start=0.1)
    events += [
        (5.0, SegmentEnded("The answer.")),
        (5.0, TurnEnded("The answer.", reasoning="think hard")),
    ]
    result = simulate(
        events, shown=display(show_reasoning=True, reasoning_style=style, min_tokens=1)
    )
    assert result.chat() == [expected]
    assert all("think" not in c.text for c in result.calls[:-1])


def test_reasoning_is_never_shown_when_off() -> None:
    events: Timeline = [(0.0, ReasoningDelta("secret")), *deltas(["Hi"], start=0.1)]
    events += [(1.0, SegmentEnded("Hi")), (1.0, TurnEnded("Hi", reasoning="secret"))]
    result = simulate(events)
    assert all("secret" not in c.text for c in result.calls)


def test_an_interrupted_turn_keeps_the_streamed_text_without_cursor() -> None:
    events = deltas(words(60), every=0.025)
    events.append((2.0, TurnEnded("", reason="interrupted")))
    result = simulate(events)
    assert result.chat() == ["".join(words(60))]


def test_a_failed_turn_keeps_the_partial_text_and_says_so_briefly() -> None:
    events = deltas(words(30), every=0.025)
    events.append((1.0, TurnFailed("provider_server_error", "The model failed (502).")))
    result = simulate(events)
    assert result.chat() == ["".join(words(30)) + "\n\n⚠️ The model failed (502)."]


def test_a_failure_before_any_text_is_one_short_notice() -> None:
    result = simulate([(0.0, TurnFailed("provider_auth", "The provider refused the key."))])
    assert result.chat() == ["⚠️ The provider refused the key."]


def test_a_stream_reset_drops_the_segment_text() -> None:
    events = [*deltas(["Wrong ", "answer ", "here ", "now "]), (0.2, StreamReset("fallback"))]
    events += deltas(["Right ", "one ", "ok "], start=3.0)
    events += [(4.0, SegmentEnded("Right one ok")), (4.0, TurnEnded("Right one ok"))]
    result = simulate(events)
    assert result.chat() == ["Right one ok"]


def test_an_answer_only_in_the_last_event_is_sent_and_commentary_is_not_repeated() -> None:
    events: Timeline = [(0.0, TextDelta("Checking.")), (0.1, Commentary("Checking."))]
    events += [
        (0.2, ToolStarted(1, "terminal", {"command": "ls"})),
        (0.3, ToolEnded(1, "terminal", True, 0.1, "")),
    ]
    result = simulate(
        [*events, (0.5, TurnEnded("Checking.", reason="max_iterations"))],
        shown=display(tool_progress="off"),
    )
    assert result.chat() == ["Checking."]
    result = simulate(
        [*events, (0.5, TurnEnded("Final words."))], shown=display(tool_progress="off")
    )
    assert result.chat() == ["Checking.", "Final words."]


def test_text_after_a_closed_segment_starts_a_new_message() -> None:
    events: Timeline = [*deltas(["One ", "two ", "three."]), (0.5, SegmentEnded("One two three."))]
    events += [
        *deltas(["Four ", "five ", "six."], start=1.0),
        (2.0, SegmentEnded("Four five six.")),
    ]
    result = simulate([*events, (2.0, TurnEnded("Four five six."))])
    assert result.chat() == ["One two three.", "Four five six."]


_outcome = st.one_of(
    st.none(),
    st.builds(RateLimited, st.sampled_from([0.5, 1.0, 3.0])),
    st.builds(Failed, st.booleans()),
)


def _runs_at_most_two(script: list[Outcome]) -> bool:
    run = 0
    for outcome in script:
        run = run + 1 if outcome is not None else 0
        if run > 2:
            return False
    return True


@settings(max_examples=150, deadline=None)
@given(
    chunks=st.lists(
        st.sampled_from(["ab ", "cd\n", "ef", "😀 ", "long-word ", "\n\n"]),
        min_size=1,
        max_size=120,
    ),
    every=st.sampled_from([0.01, 0.05, 0.2]),
    limit=st.integers(min_value=30, max_value=200),
    script=st.lists(_outcome, max_size=12).filter(_runs_at_most_two),
)
def test_whatever_the_platform_answers_the_text_arrives_once_and_fits(
    chunks: list[str], every: float, limit: int, script: list[Outcome]
) -> None:
    text = "".join(chunks)
    caps = Capabilities(
        can_edit=True, max_length=limit, length_unit="utf16", rate=RateBudget(1, 1.0)
    )
    result = simulate(reply_of(chunks, every=every), caps=caps, outcomes=script)
    chat = result.chat()
    # Nothing lost, nothing twice: the messages, read in order, are the reply.
    assert "".join(visible(m) for m in chat) == text
    assert all(measure(m, "utf16") <= limit for m in chat)
    assert_within_budget(result, caps.rate)  # failed calls count too

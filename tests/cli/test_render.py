"""The pure reply renderer: event lists in, frames out, with a fake clock."""

from __future__ import annotations

from typing import Any

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
    ToolProgress,
    ToolStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.surfaces.cli.render import Frame, RenderOptions, ReplyRenderer

USAGE = {"input_tokens": 12, "output_tokens": 34, "total_tokens": 46}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def renderer(clock: Clock | None = None, **options: Any) -> ReplyRenderer:
    return ReplyRenderer(RenderOptions(**options), clock or Clock())


def play(events: list[Event], clock: Clock | None = None, **options: Any) -> list[Frame]:
    r = renderer(clock, **options)
    frames = [frame for event in events if (frame := r.feed(event)) is not None]
    assert r.due() is None, "a turn's last event leaves nothing held"
    return frames


def committed(frames: list[Frame]) -> str:
    return "".join(text for frame in frames for _, text in frame.commit)


def styles_of(frames: list[Frame], needle: str) -> set[str]:
    return {style for frame in frames for style, text in frame.commit if needle in text}


def turn(*middle: Event, reason: str = "stop") -> list[Event]:
    return [TurnStarted("t1", "m"), *middle, TurnEnded("", model="m", usage=USAGE, reason=reason)]


def test_box_top_comes_with_the_first_token_and_the_bottom_after_the_text() -> None:
    clock = Clock()
    r = renderer(clock)
    assert r.feed(TurnStarted("t1", "m")) is None
    first = r.feed(TextDelta("Hel"))
    assert first is not None
    assert committed([first]).startswith("╭─ Iris ─")
    assert first.live == (("", "Hel"),)  # the unfinished line is live, not printed
    rest = [
        r.feed(e) for e in (TextDelta("lo\nwor"), TextDelta("ld"), SegmentEnded("Hello\nworld"))
    ]
    end = r.feed(TurnEnded("Hello\nworld", model="m", usage=USAGE))
    text = committed([f for f in [first, *rest, end] if f is not None])
    assert text.index("╭─ Iris") < text.index("Hello\n") < text.index("world\n") < text.index("╰─")
    assert text.index("╰─") < text.index("m · 12 in · 34 out tokens")
    assert end is not None and end.live == ()


def test_text_is_released_in_batches_not_per_token() -> None:
    clock = Clock()
    r = renderer(clock)
    frames: list[Frame] = []
    for i in range(200):  # 200 tokens at 1 ms each: 0.2 s of streaming
        clock.now += 0.001
        if (frame := r.feed(TextDelta(f"w{i} "))) is not None:
            frames.append(frame)
    assert 3 <= len(frames) <= 6  # the first token, then one frame per 50 ms
    last = r.flush()
    frames += [last] if last else []
    body = committed(frames).split("\n", 1)[1] + "".join(text for _, text in frames[-1].live)
    assert body.replace("\n", "") == "".join(f"w{i} " for i in range(200))


def test_held_text_is_due_one_batch_after_the_last_release() -> None:
    clock = Clock()
    r = renderer(clock)
    assert r.feed(TextDelta("a")) is not None
    released = clock.now
    clock.now += 0.01
    assert r.feed(TextDelta("b")) is None
    assert r.due() == released + 0.05
    frame = r.flush()
    assert frame is not None and frame.live == (("", "ab"),)
    assert r.due() is None and r.flush() is None


def test_everything_but_text_is_shown_at_once() -> None:
    clock = Clock()
    r = renderer(clock)
    r.feed(TextDelta("a"))
    clock.now += 0.001
    assert r.feed(TextDelta("b")) is None
    # A SegmentEnded closes the box with the event after it (the agent sends that one in the
    # same step), which says whether the answer was complete, interrupted or failed.
    assert r.feed(SegmentEnded("ab")) is None
    frame = r.feed(TurnEnded("ab", model="m", usage=USAGE))
    assert frame is not None and "ab\n╰─" in committed([frame])


def test_streaming_off_shows_the_whole_segment_in_one_frame() -> None:
    events = turn(TextDelta("Hello, "), TextDelta("world"), SegmentEnded("Hello, world"))
    frames = play(events, streaming=False)
    with_text = [f for f in frames if "Hello" in committed([f])]
    assert len(with_text) == 1
    text = committed(with_text)
    assert text.index("╭─ Iris") < text.index("Hello, world\n") < text.index("╰─")


def test_reasoning_shows_in_its_own_box_before_the_answer() -> None:
    events = turn(ReasoningDelta("thinking\nhard"), TextDelta("Answer"), SegmentEnded("Answer"))
    text = committed(play(events, show_reasoning=True))
    assert text.index("╭─ reasoning") < text.index("thinking\nhard\n") < text.index("╰─")
    assert text.index("hard\n╰─") < text.index("╭─ Iris") < text.index("Answer")
    assert {"class:reasoning"} == styles_of(play(events, show_reasoning=True), "thinking")
    hidden = committed(play(events))
    assert "thinking" not in hidden and "reasoning" not in hidden


def test_reasoning_with_streaming_off_still_comes_first() -> None:
    events = turn(ReasoningDelta("hmm"), TextDelta("Answer"), SegmentEnded("Answer"))
    text = committed(play(events, show_reasoning=True, streaming=False))
    assert (
        text.index("╭─ reasoning")
        < text.index("hmm")
        < text.index("╭─ Iris")
        < text.index("Answer")
    )


def test_commentary_is_styled_apart_and_closed_with_a_dotted_edge() -> None:
    events = turn(
        TextDelta("I'll look first."),
        Commentary("I'll look first."),
        ToolStarted(1, "terminal", {"command": "ls"}),
        ToolEnded(1, "terminal", True, 0.2, "a\nb"),
        TextDelta("Found it."),
        SegmentEnded("Found it."),
    )
    for streaming in (True, False):
        frames = play(events, streaming=streaming)
        text = committed(frames)
        assert any("class:commentary" in s for s in styles_of(frames, "I'll look first."))
        assert "class:commentary" not in " ".join(styles_of(frames, "Found it."))
        assert (
            text.index("I'll look first.\n╰┄┄┄") < text.index("⚡ terminal") < text.index("Found")
        )
        assert text.rstrip().count("╭─ Iris") == 2


def test_a_tool_runs_as_a_live_line_then_prints_once_with_its_result() -> None:
    r = renderer()
    r.feed(TurnStarted("t", "m"))
    started = r.feed(ToolStarted(1, "terminal", {"command": "ls -la"}))
    assert started is not None and started.commit == ()
    assert "".join(t for _, t in started.live) == '┊ ⚡ terminal: "ls -la" …'
    progress = r.feed(ToolProgress(1, "terminal", "line 1\nline 2"))
    assert progress is not None and "line 2" in "".join(t for _, t in progress.live)
    ended = r.feed(ToolEnded(1, "terminal", True, 0.4, "out"))
    assert ended is not None and ended.live == ()
    assert committed([ended]) == '┊ ⚡ terminal: "ls -la"  ✓ 0.4 s\n'


def test_tool_progress_modes() -> None:
    events = turn(
        ToolStarted(1, "terminal", {"command": "ls"}),
        ToolEnded(1, "terminal", True, 0.1, "x"),
        ToolStarted(2, "terminal", {"command": "pwd"}),
        ToolEnded(2, "terminal", False, 0.2, "one\nno such file"),
        ToolStarted(3, "read_file", {"path": "a.txt"}),
        ToolEnded(3, "read_file", True, 0.0, "text"),
    )
    everything = committed(play(events, tool_progress="all"))
    assert '"ls"' in everything and '"pwd"  ✗ 0.2 s  no such file' in everything
    new = committed(play(events, tool_progress="new"))
    assert '"ls"' in new and '"pwd"' not in new and '⚡ read_file: "a.txt"' in new
    assert "⚡" not in committed(play(events, tool_progress="off"))
    verbose = committed(play(events, tool_progress="verbose"))
    assert '┊ ⚡ terminal: {"command": "pwd"}' in verbose
    assert "┊   │ one\n┊   │ no such file\n" in verbose


def test_long_arguments_are_shortened_on_one_line() -> None:
    long = "echo " + "x" * 200 + "\nsecond line"
    text = committed(play(turn(ToolStarted(1, "terminal", {"command": long})), box=False))
    line = text.splitlines()[0]
    assert line.startswith('┊ ⚡ terminal: "echo xxx') and line.endswith('…"')
    assert len(line) < 80


def test_a_stream_reset_marks_the_restart_and_drops_the_unfinished_line() -> None:
    events = turn(
        TextDelta("first try\nhalf a li"),
        StreamReset("falling back to other-model", "other-model"),
        TextDelta("second try"),
        SegmentEnded("second try"),
    )
    text = committed(play(events))
    assert "half a li" not in text
    assert text.index("first try\n") < text.index("↻ falling back to other-model")
    assert text.index("↻") < text.index("second try\n╰─")
    assert text.count("╭─ Iris") == 1


def test_an_interrupted_reply_keeps_its_text_and_closes_the_box() -> None:
    events = turn(TextDelta("Partial ans"), SegmentEnded("Partial ans"), reason="interrupted")
    text = committed(play(events))
    assert text.index("Partial ans\n") < text.index("╰─") < text.index("⏹ interrupted · m")


def test_a_failed_turn_keeps_the_partial_text_and_says_why() -> None:
    events: list[Event] = [
        TurnStarted("t", "m"),
        TextDelta("Some"),
        SegmentEnded("Some"),
        TurnFailed("upstream_error", "the provider failed (502)", True, "Some"),
    ]
    text = committed(play(events))
    assert text.index("Some\n╰─") < text.index("✗ the provider failed (502)")
    assert committed(play(events, streaming=False)).count("Some") == 1


def test_plain_output_has_no_box_no_styles_and_no_live_area() -> None:
    events = turn(
        ReasoningDelta("why"),
        TextDelta("# Title\n"),
        TextDelta("**bold**"),
        SegmentEnded("# Title\n**bold**"),
        ToolStarted(1, "terminal", {"command": "ls"}),
        ToolEnded(1, "terminal", True, 0.4, "x"),
    )
    frames = play(events, box=False, show_reasoning=True)
    assert all(frame.live == () for frame in frames)
    assert {style for frame in frames for style, _ in frame.commit} == {""}
    text = committed(frames)
    assert not any(ch in text for ch in "╭╰─")
    assert "# Title\n**bold**\n" in text  # the words as written, not restyled
    assert '┊ ⚡ terminal: "ls"\n┊   ✓ 0.4 s\n' in text
    assert text.endswith("m · 12 in · 34 out tokens\n")


def test_a_very_long_line_is_committed_a_row_at_a_time() -> None:
    clock = Clock()
    r = renderer(clock, width=20)
    words = [f"word{i:03} " for i in range(60)]  # 540 characters, no newline
    frames: list[Frame] = []
    for word in words:
        clock.now += 0.06
        if (frame := r.feed(TextDelta(word))) is not None:
            frames.append(frame)
        assert len("".join(t for _, t in (frames[-1].live if frames else ()))) <= 20 * 4
    rows = committed(frames).splitlines()[1:]  # after the box top
    assert rows and all(len(row) <= 20 for row in rows)
    assert rows[0] == "word000 word001 "  # broken at a space, as the terminal would wrap
    r.feed(SegmentEnded("".join(words)))
    end = r.feed(TurnEnded("".join(words), model="m", usage=USAGE))
    assert end is not None
    assert committed([*frames, end]).replace("\n", "").count("word059") == 1


def test_markdown_is_formatted_line_by_line() -> None:
    reply = "# Title\n- item with `code`\n```\nx = '**'\n```\nsee [docs](http://d)"
    frames = play(turn(TextDelta(reply), SegmentEnded(reply)))
    assert "class:md.heading" in styles_of(frames, "Title")
    assert "class:md.bullet" in styles_of(frames, "• ")
    assert "class:md.code" in styles_of(frames, "code")
    assert styles_of(frames, "x = '**'") == {"class:md.code"}  # inside a fence: as written
    assert "class:md.url" in styles_of(frames, "(http://d)")


@settings(max_examples=80, deadline=None)
@given(
    reply=st.text(alphabet="ab *`#-\n>_[]()", max_size=160),
    cuts=st.lists(st.integers(min_value=0, max_value=160), max_size=12),
    box=st.booleans(),
    width=st.sampled_from([12, 80]),
)
def test_how_a_reply_is_chunked_never_changes_what_is_printed(
    reply: str, cuts: list[int], box: bool, width: int
) -> None:
    """The stable prefix: output depends on the text, never on where the deltas split it."""
    points = sorted({c for c in cuts if 0 < c < len(reply)})
    chunks = [reply[a:b] for a, b in zip([0, *points], [*points, len(reply)], strict=True)]
    streamed = turn(*[TextDelta(c) for c in chunks if c], SegmentEnded(reply))
    whole = turn(TextDelta(reply), SegmentEnded(reply)) if reply else turn()

    def shown(events: list[Event]) -> list[tuple[str, str]]:
        pieces = [p for f in play(events, box=box, width=width) for p in f.commit]
        merged: list[tuple[str, str]] = []
        for style, text in pieces:
            if merged and merged[-1][0] == style:
                merged[-1] = (style, merged[-1][1] + text)
            else:
                merged.append((style, text))
        return merged

    assert shown(streamed) == shown(whole)


# -- what the segment model fixed (each failed before the renderer consumed it) ---------------


def test_a_replay_that_repeats_the_printed_text_is_printed_once() -> None:
    events = turn(
        TextDelta("Hello wor"),
        StreamReset("retrying", "m"),
        TextDelta("Hello"),
        TextDelta(" world"),
        SegmentEnded("Hello world"),
    )
    text = committed(play(events, box=False))
    assert text.startswith("Hello world\n") and "↻" not in text


def test_text_the_agent_held_back_is_printed_at_the_segment_end() -> None:
    text = committed(play(turn(TextDelta("Hi"), SegmentEnded("Hi there")), box=False))
    assert text.startswith("Hi there\n")


def test_an_answer_given_only_at_the_end_of_the_turn_is_printed() -> None:
    events: list[Event] = [TurnStarted("t1", "m"), TurnEnded("Just this", model="m", usage=USAGE)]
    assert committed(play(events, box=False)).startswith("Just this\n")
    assert "Just this" in committed(play(events))

"""The frame encoder, fed event lists: what a device would see for each kind of turn."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from iris.events import (
    ApprovalRequested,
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
from iris.protocol.frames import EncoderSettings, FrameEncoder, encode, tool_preview
from iris.protocol.types import SERVER

USAGE = {"input_tokens": 10, "output_tokens": 42, "total_tokens": 52}


def ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"m{next(counter)}"


def types(frames: list[dict[str, Any]]) -> list[str]:
    return [f["type"] for f in frames]


def run(events: list[Event], **settings: Any) -> list[dict[str, Any]]:
    return encode(events, EncoderSettings(**settings), ids())


def test_tool_turn_gives_doc05_sequence() -> None:
    frames = run(
        [
            TurnStarted("t", "fake-model"),
            TextDelta("Let me look…"),
            Commentary("Let me look…"),
            ToolStarted(1, "terminal", {"command": "ls -la"}),
            ToolProgress(1, "terminal", "12 lines"),
            ToolEnded(1, "terminal", True, 0.4, "a\nb\n"),
            TextDelta("The repo has…"),
            SegmentEnded("The repo has 12 files."),
            TurnEnded("The repo has 12 files.", model="fake-model", usage=USAGE),
        ]
    )
    assert frames == [
        {"type": "typing", "on": True},
        {"type": "message.start", "message_id": "m1", "role": "assistant"},
        {"type": "message.update", "message_id": "m1", "text": "Let me look…"},
        {"type": "commentary", "message_id": "m1", "text": "Let me look…"},
        {
            "type": "tool.start",
            "index": 1,
            "name": "terminal",
            "preview": "ls -la",
            "args": {"command": "ls -la"},
        },
        {"type": "tool.progress", "index": 1, "name": "terminal", "note": "12 lines"},
        {
            "type": "tool.end",
            "index": 1,
            "name": "terminal",
            "ok": True,
            "duration": 0.4,
            "output_preview": "a\nb\n",
        },
        {"type": "message.start", "message_id": "m2", "role": "assistant"},
        {"type": "message.update", "message_id": "m2", "text": "The repo has…"},
        {
            "type": "message.stop",
            "message_id": "m2",
            "final_text": "The repo has 12 files.",
            "model": "fake-model",
            "tokens": 42,
        },
        {"type": "typing", "on": False},
    ]


def test_an_approval_request_carries_its_arguments_as_tool_start_does() -> None:
    """One shape for a call's arguments in the protocol: the object, whatever the model wrote
    (what is not an object is wrapped as the agent wraps it for tool.start)."""
    written = [
        ('{"command": "rm -rf build"}', {"command": "rm -rf build"}),
        ("[1, 2]", {"_value": [1, 2]}),
        ('{"command": "ls"', {"_raw": '{"command": "ls"'}),
    ]
    for args, shown in written:
        request = ApprovalRequested(1, "terminal", args, "rm -rf build", "appr_1", 1000.0)
        [frame] = [f for f in run([request]) if f["type"] == "approval.request"]
        assert frame["args"] == shown
        assert SERVER.validate_python(frame) == frame


def test_updates_follow_buffer_threshold_and_extend_each_other() -> None:
    deltas = [TextDelta("abcde") for _ in range(10)]  # 50 characters
    frames = run([TurnStarted("t", "m"), *deltas], buffer_threshold=12)
    texts = [f["text"] for f in frames if f["type"] == "message.update"]
    assert texts == ["abcde", "abcde" * 4, "abcde" * 7, "abcde" * 10]
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))


def test_edit_interval_sends_waiting_text_on_tick() -> None:
    encoder = FrameEncoder(EncoderSettings(edit_interval=0.8, buffer_threshold=100), ids())
    encoder.feed(TurnStarted("t", "m"), 0.0)
    assert types(encoder.feed(TextDelta("Hi"), 0.0)) == ["message.start", "message.update"]
    assert encoder.feed(TextDelta(" there"), 0.1) == []
    assert encoder.deadline() == 0.8
    assert encoder.tick(0.5) == []
    assert encoder.tick(0.8) == [{"type": "message.update", "message_id": "m1", "text": "Hi there"}]
    assert encoder.deadline() is None  # nothing waits any more
    # A delta after the interval went by goes out at once.
    assert types(encoder.feed(TextDelta("!"), 2.0)) == ["message.update"]


def test_a_stream_reset_shows_the_retry_as_soon_as_it_differs_from_the_bubble() -> None:
    frames = run(
        [
            TurnStarted("t", "a"),
            TextDelta("wrong answer"),
            StreamReset("falling back", "b"),
            TextDelta("right"),
            SegmentEnded("right"),
            TurnEnded("right", model="b", usage=USAGE),
        ],
        buffer_threshold=1,
    )
    updates = [f["text"] for f in frames if f["type"] == "message.update"]
    assert updates == ["wrong answer", "right"]
    stop = frames[-2]
    assert stop["final_text"] == "right" and stop["model"] == "b"


def test_streaming_off_gives_one_message_per_reply() -> None:
    frames = run(
        [
            TurnStarted("t", "m"),
            TextDelta("Checking."),
            Commentary("Checking."),
            ToolStarted(1, "read_file", {"path": "README.md"}),
            ToolEnded(1, "read_file", True, 0.01, "# Iris"),
            TextDelta("It is Iris."),
            SegmentEnded("It is Iris."),
            TurnEnded("It is Iris.", model="m", usage=USAGE),
        ],
        streaming=False,
    )
    assert types(frames) == [
        "typing",
        "commentary",
        "tool.start",
        "tool.end",
        "message",
        "typing",
    ]
    assert frames[4] == {
        "type": "message",
        "message_id": "m2",
        "text": "It is Iris.",
        "role": "assistant",
        "model": "m",
        "tokens": 42,
    }


def test_structured_reasoning_only_when_shown() -> None:
    events: list[Event] = [
        TurnStarted("t", "m"),
        ReasoningDelta("think "),
        ReasoningDelta("hard"),
        TextDelta("42"),
        SegmentEnded("42"),
        TurnEnded("42", reasoning="think hard", model="m", usage=USAGE),
    ]
    assert run(events, show_reasoning=True)[-2]["reasoning"] == "think hard"
    assert "reasoning" not in run(events, show_reasoning=False)[-2]


def test_reasoning_of_a_commentary_round_goes_with_the_answer() -> None:
    events: list[Event] = [
        TurnStarted("t", "m"),
        ReasoningDelta("plan. "),
        TextDelta("Looking."),
        Commentary("Looking."),
        ToolStarted(1, "terminal", {"command": "ls"}),
        ToolEnded(1, "terminal", True, 0.1, ""),
        ReasoningDelta("conclude."),
        TextDelta("Done."),
        SegmentEnded("Done."),
        TurnEnded("Done.", reasoning="plan. conclude.", model="m", usage=USAGE),
    ]
    frames = run(events, show_reasoning=True)
    assert "reasoning" not in next(f for f in frames if f["type"] == "commentary")
    assert frames[-2]["reasoning"] == "plan. conclude."


def test_inline_reasoning_in_the_text_is_split_off() -> None:
    text = "💭 **Reasoning:**\n```\nadd them\n```\n\n2 + 2 = 4"
    events: list[Event] = [
        TurnStarted("t", "m"),
        TextDelta(text),
        SegmentEnded(text),
        TurnEnded(text, model="m", usage=USAGE),
    ]
    shown = run(events, show_reasoning=True)[-2]
    assert shown["final_text"] == "2 + 2 = 4" and shown["reasoning"] == "add them"
    hidden = run(events, show_reasoning=False)[-2]
    assert hidden["final_text"] == "2 + 2 = 4" and "reasoning" not in hidden


def test_failure_keeps_the_shown_text_then_error_then_typing_off() -> None:
    frames = run(
        [
            TurnStarted("t", "m"),
            TextDelta("Half an ans"),
            SegmentEnded("Half an ans"),
            TurnFailed("provider_unreachable", "connection dropped", True, "Half an ans"),
        ]
    )
    assert types(frames)[-3:] == ["message.stop", "error", "typing"]
    assert frames[-3]["final_text"] == "Half an ans"
    assert frames[-2] == {
        "type": "error",
        "code": "provider_unreachable",
        "message": "connection dropped",
    }
    assert frames[-1] == {"type": "typing", "on": False}


def test_interrupted_turn_closes_the_bubble_with_the_text_so_far() -> None:
    frames = run(
        [
            TurnStarted("t", "m"),
            TextDelta("Once upon"),
            SegmentEnded("Once upon"),
            TurnEnded("Once upon", reason="interrupted", model="m", usage=USAGE),
        ]
    )
    assert types(frames) == ["typing", "message.start", "message.update", "message.stop", "typing"]
    assert frames[3]["final_text"] == "Once upon"


def test_fail_outside_the_stream_still_ends_with_typing_off_once() -> None:
    encoder = FrameEncoder(EncoderSettings(), ids())
    encoder.begin()
    encoder.feed(TurnStarted("t", "m"), 0)
    encoder.feed(TextDelta("partial"), 0)
    frames = encoder.fail("internal_error", "boom")
    assert types(frames) == ["message.stop", "error", "typing"]
    assert encoder.fail("cancelled", "again") == []
    assert encoder.feed(TurnEnded("late"), 0) == []


def test_tool_output_preview_is_a_short_tail() -> None:
    frames = run([TurnStarted("t", "m"), ToolEnded(1, "terminal", False, 1.5, "x" * 900 + "END")])
    assert frames[-1]["output_preview"].endswith("END")
    assert len(frames[-1]["output_preview"]) == 500


def test_tool_preview_prefers_the_telling_argument() -> None:
    assert tool_preview({"timeout": 5, "command": "git status"}) == "git status"
    assert tool_preview({"n": 3}) == '{"n": 3}'
    assert len(tool_preview({"command": "y" * 300})) == 80


def test_answer_only_in_turn_ended_still_reaches_the_device() -> None:
    frames = run([TurnStarted("t", "m"), TurnEnded("just this", model="m", usage=USAGE)])
    assert types(frames) == ["typing", "message", "typing"]
    assert frames[1]["text"] == "just this"


# -- properties over any well-formed turn (the grammar of iris.events) --------------------------

words = st.text(alphabet="ab c\n", min_size=1, max_size=6)


@st.composite
def turns(draw: st.DrawFn) -> list[Event]:
    events: list[Event] = [TurnStarted("t", "m")]
    index = 0
    for _ in range(draw(st.integers(0, 4))):
        events += [ReasoningDelta(w) for w in draw(st.lists(words, max_size=2))]
        texts = draw(st.lists(words, max_size=8))
        events += [TextDelta(w) for w in texts]
        if texts and draw(st.booleans()):
            events.append(StreamReset("retry"))
            texts = draw(st.lists(words, max_size=4))
            events += [TextDelta(w) for w in texts]
        calls = draw(st.integers(0, 2))
        if texts:
            closer = Commentary if calls else SegmentEnded
            events.append(closer("".join(texts)))
        for _ in range(calls):
            index += 1
            events.append(ToolStarted(index, "terminal", {"command": "ls"}))
            events += [ToolProgress(index, "terminal", "…")] * draw(st.integers(0, 2))
            events.append(ToolEnded(index, "terminal", draw(st.booleans()), 0.1, "out"))
        if not calls:
            break
    if draw(st.booleans()):
        events.append(TurnEnded("", model="m", usage=USAGE))
    else:
        events.append(TurnFailed("provider_unreachable", "gone", True))
    return events


@given(turns(), st.integers(1, 30), st.booleans())
def test_every_turn_is_well_bracketed(events: list[Event], threshold: int, streaming: bool) -> None:
    encoder = FrameEncoder(EncoderSettings(streaming=streaming, buffer_threshold=threshold), ids())
    frames = encoder.begin()
    for n, event in enumerate(events):
        frames += encoder.tick(n * 0.3) + encoder.feed(event, n * 0.3)
    assert frames[0] == {"type": "typing", "on": True}
    assert frames[-1] == {"type": "typing", "on": False}
    assert [f["type"] for f in frames].count("typing") == 2
    failed = isinstance(events[-1], TurnFailed)
    assert (frames[-2]["type"] == "error") == failed
    open_: dict[str, str] = {}  # started message -> its last snapshot
    rewrites = 0
    closed: set[str] = set()
    for frame in frames:
        kind, message_id = frame["type"], frame.get("message_id")
        if kind == "message.start":
            assert streaming and message_id not in open_ and message_id not in closed
            open_[message_id] = ""
        elif kind == "message.update":
            last = open_[message_id]
            if not frame["text"].startswith(last):  # a reset: only after a StreamReset
                rewrites += 1
            open_[message_id] = frame["text"]
        elif kind in ("message.stop", "commentary", "message"):
            assert message_id not in closed
            if kind != "commentary":  # commentary closes a streamed bubble or stands alone
                assert (kind == "message.stop") == (message_id in open_)
            open_.pop(message_id, None)
            closed.add(message_id)
    assert open_ == {}  # every bubble that opened was closed
    assert rewrites <= sum(isinstance(e, StreamReset) for e in events)
    tools = [(f["type"], f["index"]) for f in frames if f["type"].startswith("tool.")]
    assert [i for t, i in tools if t == "tool.start"] == [i for t, i in tools if t == "tool.end"]

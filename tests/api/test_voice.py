"""The voice profile's pure part: a turn's events as a speaker gets them, fed as lists."""

from __future__ import annotations

from iris.events import (
    Event,
    ReasoningDelta,
    SegmentEnded,
    TextDelta,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)
from iris.surfaces.api.chat_encoder import ChatEncoder
from iris.surfaces.api.voice import Spoken
from iris.surfaces.api.voice_later import APPROVE


def spoken(events: list[Event]) -> list[Event]:
    voice = Spoken()
    return [out for event in events for out in voice.feed(event)]


def test_markdown_goes_word_by_word_and_the_closing_texts_match_what_was_said() -> None:
    out = spoken(
        [
            TurnStarted("t", "m"),
            ReasoningDelta("the user wants the light"),
            TextDelta("**Do"),
            TextDelta("ne!** The"),
            TextDelta(" light"),
            SegmentEnded("**Done!** The light"),
            TurnEnded(text="**Done!** The light"),
        ]
    )
    assert out == [
        TurnStarted("t", "m"),
        TextDelta("Done!"),
        TextDelta(" The"),
        TextDelta(" light"),
        SegmentEnded("Done! The light"),
        TurnEnded(text="Done! The light"),
    ]


def test_what_a_client_reads_has_no_marks_and_no_reasoning() -> None:
    events: list[Event] = [
        TurnStarted("t", "m"),
        ReasoningDelta("thinking"),
        TextDelta("- `on`"),
        SegmentEnded("- `on`"),
        ToolStarted(1, "terminal", {}),
        TextDelta("## The hall"),
        TextDelta(" is *on*."),
        TurnEnded(text="## The hall is *on*."),
    ]
    encoder = ChatEncoder("c", "iris-voice", 0)
    for event in spoken(events):
        encoder.feed(event)
    message = encoder.completion()["choices"][0]["message"]
    assert message["content"] == "on\n\nThe hall is on."
    assert "reasoning_content" not in message


def test_a_segment_of_marks_alone_says_nothing_and_the_answer_stays_the_last_said() -> None:
    said = spoken(
        [
            TextDelta("Lights on."),
            SegmentEnded("Lights on."),
            TextDelta("**"),
            SegmentEnded("**"),
            TurnEnded(text="**"),
        ]
    )
    assert said[-2:] == [SegmentEnded(""), TurnEnded(text="Lights on.")]


def test_a_reply_ended_early_says_what_it_had_then_the_one_sentence() -> None:
    voice = Spoken()
    events = [
        out for e in [TurnStarted("t", "m"), TextDelta("**Sure**, ")] for out in voice.feed(e)
    ]
    events += voice.end_with(APPROVE)
    encoder = ChatEncoder("c", "iris-voice", 0)
    streamed = "".join(
        chunk["choices"][0]["delta"].get("content") or ""
        for event in events
        for chunk in encoder.feed(event)
        if chunk["choices"]
    )
    completion = encoder.completion()["choices"][0]
    assert streamed == completion["message"]["content"] == f"Sure, \n\n{APPROVE}"
    assert completion["finish_reason"] == "stop"  # no tool call reaches the client
    assert Spoken().end_with(APPROVE)[-1] == TurnEnded(text=APPROVE, reason="stop")

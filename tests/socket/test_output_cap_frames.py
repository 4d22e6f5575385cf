"""A turn cut by the output cap (``TurnEnded(reason="length")``): the device keeps the text it
was shown (``message.stop``), then gets ``error {code: "output_too_long"}`` and typing off."""

from __future__ import annotations

import itertools

from iris.events import SegmentEnded, TextDelta, TurnEnded, TurnStarted
from iris.protocol.frames import EncoderSettings, encode


def test_a_capped_turn_stops_the_message_then_sends_an_error() -> None:
    counter = itertools.count(1)
    frames = encode(
        [
            TurnStarted("t", "fake-model"),
            TextDelta("0123456789"),
            SegmentEnded("0123456789"),
            TurnEnded("0123456789", model="fake-model", reason="length"),
        ],
        EncoderSettings(),
        lambda: f"m{next(counter)}",
    )
    assert [f["type"] for f in frames] == [
        "typing",
        "message.start",
        "message.update",
        "message.stop",
        "error",
        "typing",
    ]
    assert frames[3]["final_text"] == "0123456789"
    assert frames[4]["code"] == "output_too_long"
    assert frames[-1] == {"type": "typing", "on": False}


def test_a_normal_end_sends_no_error() -> None:
    frames = encode([TurnStarted("t", "m"), TextDelta("hi"), TurnEnded("hi")])
    assert "error" not in [f["type"] for f in frames]

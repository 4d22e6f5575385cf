"""The app's store with ``message.append``: one path for both forms, and no corrupted text.

The property: for any turn (text with emoji, combining marks and CJK; resets; segments), a
device applying what the server's per-device writer makes of it — appends and snapshots, with
snapshots skipped as a slow device's are, and resumes — holds the same text at every step as a
device that gets the same frames as snapshots only."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from iris.app.core.view import ChatView
from iris.events import Event, SegmentEnded, StreamReset, TextDelta, TurnEnded
from iris.fanout.rules import Frame
from iris.fanout.subscription import encode_frame
from iris.protocol.appends import AppendWriter
from iris.protocol.frames import EncoderSettings, FrameEncoder

from .clock import FakeClock


def wire(frame: Frame) -> Frame:
    """The frame as a device parses it off the socket."""
    return json.loads(encode_frame(frame))


def stamped(*bodies: Frame) -> list[Frame]:
    return [{**body, "chat_id": "c1", "seq": n} for n, body in enumerate(bodies, start=1)]


def start(message_id: str = "m1") -> Frame:
    return {"type": "message.start", "message_id": message_id, "role": "assistant"}


def append(seq: int, offset: int, text: str, message_id: str = "m1") -> Frame:
    return {
        "type": "message.append",
        "message_id": message_id,
        "offset": offset,
        "text": text,
        "chat_id": "c1",
        "seq": seq,
    }


def test_appends_and_snapshots_give_the_same_bubble() -> None:
    by_append, by_snapshot = ChatView(FakeClock()), ChatView(FakeClock())
    for frame in stamped(start()):
        by_append.apply(frame)
        by_snapshot.apply(frame)
    by_append.apply(append(2, 0, "中文 😀"))
    by_append.apply(append(3, 5, " e\u0301"))
    by_snapshot.apply(
        {**stamped(start())[0], "type": "message.update", "seq": 2, "text": "中文 😀"}
    )
    by_snapshot.apply(
        {**stamped(start())[0], "type": "message.update", "seq": 3, "text": "中文 😀 e\u0301"}
    )
    [a], [b] = by_append.bubbles, by_snapshot.bubbles
    assert a.text == b.text == "中文 😀 e\u0301"
    assert by_append.last_seq == by_snapshot.last_seq == 3
    assert by_append.take_resync() is None


def test_an_append_that_does_not_fit_is_refused_and_asks_for_a_resume_once() -> None:
    store = ChatView(FakeClock())
    store.apply(stamped(start())[0])
    store.apply(append(2, 0, "Hello"))
    # seq 3 was lost: the next append starts past what the store holds.
    store.apply(append(4, 11, " again"))
    [bubble] = store.bubbles
    assert bubble.text == "Hello"  # nothing corrupted is shown
    assert store.take_resync() == 3  # the frame before the refused one
    store.apply(append(5, 17, "!"))  # in flight before the resume reached the server
    assert bubble.text == "Hello" and store.take_resync() is None  # asked once
    store.apply(
        {"type": "message.update", "message_id": "m1", "text": "Hello world again!", "seq": 5}
    )
    store.apply(append(6, 18, " Bye"))
    assert bubble.text == "Hello world again! Bye"
    assert store.take_resync() is None


def test_an_append_counted_in_code_points_is_refused() -> None:
    store = ChatView(FakeClock())
    store.apply(stamped(start())[0])
    store.apply(append(2, 0, "😀"))
    store.apply(append(3, 1, "x"))  # a server counting code points would say 1; UTF-16 says 2
    assert store.bubbles[0].text == "😀"
    assert store.take_resync() == 2


def stop_with_rest(seq: int, offset: int, text: str) -> Frame:
    return {**append(seq, offset, text), "type": "message.stop", "model": "m"}


def test_a_stop_that_ends_with_an_append_goes_the_same_path() -> None:
    store = ChatView(FakeClock(), streaming=False)  # the app's streaming setting off, too
    store.apply(stamped(start())[0])
    store.apply(append(2, 0, "中文 😀"))
    store.apply(stop_with_rest(3, 5, " e\u0301"))
    [bubble] = store.bubbles
    assert bubble.text == "中文 😀 e\u0301" and bubble.stopped and bubble.model == "m"


def test_a_closing_append_that_does_not_fit_waits_for_the_replay() -> None:
    store = ChatView(FakeClock())
    store.apply(stamped(start())[0])
    store.apply(append(3, 4, "lost"))  # does not fit
    store.apply(stop_with_rest(4, 8, "!"))
    assert store.take_resync() == 2
    assert store.bubbles[0].text == "" and not store.bubbles[0].stopped
    # The replay: a snapshot, then the stop again (now it fits).
    store.apply({"type": "message.update", "message_id": "m1", "text": "the text", "seq": 3})
    store.apply(stop_with_rest(4, 8, "!"))
    assert store.bubbles[0].text == "the text!" and store.bubbles[0].stopped


# -- the property ----------------------------------------------------------------------------

PIECES = st.sampled_from(
    ["a", "word ", "中文", "字", "😀", "👍🏽", "👨‍👩‍👧", "e\u0301", "\u0301", "𠀋", "\n", "é", " "]
)
TEXT = st.lists(PIECES, min_size=1, max_size=4).map("".join)
EVENT = st.one_of(
    st.builds(TextDelta, TEXT),
    st.builds(TextDelta, TEXT),
    st.builds(TextDelta, TEXT),
    st.just(StreamReset("retry")),
    st.builds(SegmentEnded, st.just("")),
    st.builds(SegmentEnded, TEXT),  # a final text other than the streamed one
)
# What happens to each frame on its way to the appending device.
FATE = st.sampled_from(["send", "send", "send", "skip", "resume"])


def turn_frames(events: list[Event]) -> list[Frame]:
    encoder = FrameEncoder(EncoderSettings(buffer_threshold=3, edit_interval=1e9))
    bodies = encoder.begin()
    attempt = ""  # what the round's latest attempt streamed
    for event in events:
        if isinstance(event, TextDelta):
            attempt += event.text
        elif isinstance(event, StreamReset):
            attempt = ""
        elif isinstance(event, SegmentEnded):
            if not event.text:  # final text = streamed text
                event = SegmentEnded(attempt)
            attempt = ""
        bodies += encoder.feed(event, 0.0)
    bodies += encoder.feed(TurnEnded(""), 0.0)
    return stamped(*bodies)


@settings(max_examples=300, deadline=None)
@given(st.lists(EVENT, max_size=40), st.data())
def test_appends_hold_the_same_text_as_snapshots_at_every_step(
    events: list[Event], data: st.DataObject
) -> None:
    writer = AppendWriter()
    by_append, by_snapshot = ChatView(FakeClock()), ChatView(FakeClock())
    for frame in turn_frames(events):
        fate = data.draw(FATE) if frame["type"] == "message.update" else "send"
        if fate == "skip":  # newest wins: a slow device never gets this snapshot
            continue
        if fate == "resume":  # the device resumed: the server forgets what it holds
            writer.forget()
        converted = writer.convert(frame)
        by_append.apply(wire(converted or frame))
        by_snapshot.apply(wire(frame))
        assert [b.text for b in by_append.bubbles] == [b.text for b in by_snapshot.bubbles]
        assert by_append.take_resync() is None

"""The cross-surface property for iris frames: what a device ends up showing is the segment
model's final text, for a device that gets snapshots and for one that gets appends.

Every drawn turn (``tests.strategies.turns``: resets with repeating, shorter, longer and new
replays, held-back closers, every ending) goes through the frame encoder at a random cadence,
is stamped as the hub stamps it, and is applied by two app stores: one as doc 05 devices get
the frames, one through the per-device ``AppendWriter``. At every step each open bubble shows a
text the model reported for its segment (never a doubled or spliced one); at the end each
segment's bubble holds the model's final text (the answer without a reasoning layout the
encoder splits off).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from iris.app.core.view import Bubble, ChatView
from iris.events import Event
from iris.fanout.rules import Frame
from iris.formats.reasoning import split_reasoning
from iris.protocol.appends import AppendWriter
from iris.protocol.frames import EncoderSettings, FrameEncoder
from iris.segments import SegmentClosed, SegmentGrown, SegmentReset, segment_items
from tests.app.clock import FakeClock
from tests.strategies import ScriptedTurn, turns


def ids() -> Callable[[], str]:
    counter = itertools.count(0)
    return lambda: f"s{next(counter)}"  # the encoder opens one message per segment, in order


def model_view(events: list[Event]) -> tuple[dict[str, set[str]], dict[str, str]]:
    """Per message id: every text the model reported for its segment, and its final text."""
    seen: dict[str, set[str]] = {}
    final: dict[str, str] = {}
    for item in segment_items(events):
        match item:
            case SegmentGrown(segment=n, text=text) | SegmentReset(segment=n, text=text):
                seen.setdefault(f"s{n}", {""}).add(text)
            case SegmentClosed(segment=n, text=text, shown=shown):
                seen.setdefault(f"s{n}", {""}).update({text, shown})
                final[f"s{n}"] = split_reasoning(text)[1]
            case _:
                pass
    return seen, final


def frames_of(events: list[Event], settings_: EncoderSettings, times: list[float]) -> list[Frame]:
    encoder = FrameEncoder(settings_, ids())
    bodies = list(encoder.begin())
    for event, now in zip(events, times, strict=True):
        bodies += encoder.tick(now)
        bodies += encoder.feed(event, now)
    return [{**body, "chat_id": "c", "seq": n} for n, body in enumerate(bodies, start=1)]


def texts(store: ChatView) -> dict[str, Bubble]:
    return {b.message_id: b for b in store.bubbles if b.kind in ("message", "commentary")}


@settings(max_examples=200, deadline=None)
@given(
    turns(),
    st.integers(1, 40),
    st.booleans(),
    st.lists(st.floats(0.0, 1.0), min_size=200, max_size=200),
)
def test_every_device_ends_with_the_models_final_text(
    turn: ScriptedTurn, threshold: int, streaming: bool, gaps: list[float]
) -> None:
    events = turn.events
    times = list(itertools.accumulate(gaps[: len(events)]))
    encoder_settings = EncoderSettings(streaming=streaming, buffer_threshold=threshold)
    seen, final = model_view(events)
    snapshots, appends = ChatView(FakeClock()), ChatView(FakeClock())
    writer = AppendWriter()
    for frame in frames_of(events, encoder_settings, times):
        snapshots.apply(frame)
        appends.apply(writer.convert(frame) or frame)
        assert appends.take_resync() is None  # every append fitted what the device held
        for store in (snapshots, appends):
            for message_id, bubble in texts(store).items():
                # Only texts the model reported: never doubled, never spliced across a reset.
                assert bubble.text in seen[message_id] | {final[message_id]}
    for store in (snapshots, appends):
        shown = {message_id: bubble.text for message_id, bubble in texts(store).items()}
        assert shown == final
        assert all(bubble.stopped for bubble in texts(store).values())

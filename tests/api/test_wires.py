"""Issue 45: a text delta takes a fast lane through each API's wire (its bytes straight from an
event shape encoded once, no chunk objects); a client reads exactly the bytes, and a finished
turn stores exactly the answer, that the encoders' own objects make of the same events."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from iris.config import config_from_dict
from iris.events import Event, SegmentEnded, TextDelta, TurnEnded, TurnStarted
from iris.state.responses import SqliteResponses
from iris.state.sqlite import Store
from iris.surfaces.api.bodies import parse_chat, parse_responses
from iris.surfaces.api.responses_encoder import ResponsesEncoder
from iris.surfaces.api.sse import data_frames, named_frames
from iris.surfaces.api.wires import ChatWire, ResponsesWire
from tests.strategies import ScriptedTurn, split_deltas, turns

CONFIG = config_from_dict({"model": {"provider": "chat_completions", "name": "m"}}, env={})
STORE = SqliteResponses(Store(":memory:"))  # never written: no test here finishes a turn


def chat_wire() -> ChatWire:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    return ChatWire(parse_chat(body, models=["m"], config=CONFIG))


def responses_wire() -> ResponsesWire:
    call = parse_responses(
        {"model": "m", "input": "hi", "stream": True}, models=["m"], config=CONFIG
    )
    wire = ResponsesWire(call, STORE)
    old = wire.encoder  # a fixed clock: both ways end the response at the same second
    wire.encoder = ResponsesEncoder(
        old.response_id, old.model, 1700000000, call.echo, clock=lambda: 1.7e9
    )
    return wire


def both_ways(make: Callable[[], Any], events: list[Event]) -> tuple[bytes, bytes, Any, Any]:
    """The bytes of ``events`` through a wire, and through a twin whose every event goes
    through its encoder's objects; and the two wires."""
    wire, slow = make(), make()
    slow.encoder = copy.deepcopy(wire.encoder)  # the same ids
    slow.encoder.text_frame = lambda text: None
    fast_bytes = b"".join(wire.frames(event) for event in events)
    encode = data_frames if isinstance(wire, ChatWire) else named_frames
    slow_bytes = b"".join(encode(slow.encoder.feed(event)) for event in events)
    return fast_bytes, slow_bytes, wire, slow


@settings(max_examples=150)
@given(turns())
def test_every_turn_streams_the_same_bytes_and_answer_either_way(turn: ScriptedTurn) -> None:
    """Resets, replays, held-back text, reasoning between texts, tools, failures: wherever
    the fast lane does not apply, the event takes the objects' way, and the stream is the
    same."""
    chat_fast, chat_slow, chat, chat_ref = both_ways(chat_wire, turn.events)
    assert chat_fast == chat_slow
    assert chat.answer() == chat_ref.answer()
    resp_fast, resp_slow, resp, resp_ref = both_ways(responses_wire, turn.events)
    assert resp_fast == resp_slow
    assert resp.answer() == resp_ref.answer()
    assert resp.snapshot() == resp_ref.snapshot()


@given(st.text(min_size=1, max_size=40).flatmap(split_deltas))
def test_any_text_streams_the_same_bytes_either_way(deltas: list[str]) -> None:
    """Quotes, control characters, line separators, non-BMP characters: the text's place in
    the shape is encoded as the whole event would encode it."""
    text = "".join(deltas)
    events: list[Event] = [
        TurnStarted("t1", "m"),
        *(TextDelta(delta) for delta in deltas),
        SegmentEnded(text),
        TurnEnded(text, model="m", usage={}, reason="stop"),
    ]
    for make in (chat_wire, responses_wire):
        fast, slow, done, reference = both_ways(make, events)
        assert fast == slow
        assert done.answer() == reference.answer()


def test_the_fast_lane_carries_the_common_case() -> None:
    """The plain deltas of an open segment after its first are the ones that skip the
    objects (what the benchmark's proxied streams are made of)."""
    for wire in (chat_wire(), responses_wire()):
        wire.frames(TurnStarted("t1", "m"))
        wire.frames(TextDelta("first"))
        fast = [wire.encoder.text_frame(f" tok{i}") for i in range(3)]
        assert all(frame is not None for frame in fast)
        wire.frames(TurnEnded("", model="m", usage={}, reason="stop"))
        status, body = wire.answer()
        assert status == 200
        text = "".join(itertools.chain(["first"], (f" tok{i}" for i in range(3))))
        if isinstance(wire, ChatWire):
            assert body["choices"][0]["message"]["content"] == text
        else:
            assert body["output"][0]["content"][0]["text"] == text

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
from iris.events import (
    Event,
    ReasoningDelta,
    SegmentEnded,
    StreamReset,
    TextDelta,
    ToolCallDelta,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.state.responses import SqliteResponses
from iris.state.sqlite import Store
from iris.surfaces.api.bodies import parse_chat, parse_responses
from iris.surfaces.api.responses_encoder import ResponsesEncoder
from iris.surfaces.api.sse import data_frames, named_frames
from iris.surfaces.api.wires import ChatWire, ResponsesWire
from tests.strategies import ScriptedTurn, split_deltas, turns, words

CONFIG = config_from_dict({"model": {"provider": "chat_completions", "name": "m"}}, env={})
STORE = SqliteResponses(Store(":memory:"))  # never written: no test here finishes a turn


def chat_wire(legacy: bool = False) -> ChatWire:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if legacy:  # the one call as ``function_call`` deltas
        body["functions"] = [{"name": "tool_0", "parameters": {"type": "object"}}]
    return ChatWire(parse_chat({**body, "stream": True}, models=["m"], config=CONFIG))


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


@st.composite
def call_turns(draw: st.DrawFn, most: int = 3) -> list[Event]:
    """A turn that streams 1 to ``most`` client tool calls, their fragments interleaved,
    after some text or none; it ends with the calls (whole, or with more than was streamed),
    or fails midway."""
    events: list[Event] = [TurnStarted("t1", "m")]
    events += [TextDelta(t) for t in draw(st.lists(st.sampled_from(["Hi", " so"]), max_size=2))]
    calls = [
        {"id": f"call_{n}", "name": f"tool_{n}", "arguments": draw(st.text('a"\\{}é🙂\n'))}
        for n in range(draw(st.integers(1, most)))
    ]
    queues: list[list[Event]] = []
    for n, call in enumerate(calls):
        pieces = draw(split_deltas(call["arguments"])) if call["arguments"] else []
        head = ToolCallDelta(n, pieces[0] if pieces else "", call["id"], call["name"])
        queues.append([head, *(ToolCallDelta(n, piece) for piece in pieces[1:])])
    while any(queues):
        n = draw(st.sampled_from([i for i, q in enumerate(queues) if q]))
        if queues[n][0] is not queues[n][-1] or draw(st.booleans()):
            events.append(queues[n].pop(0))
        else:
            queues[n].pop(0)  # the last fragment only in the turn's end
        if draw(st.integers(0, 9)) == 0:
            events.append(TurnFailed("upstream_error", "the provider failed", True, ""))
            return events
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    events.append(TurnEnded(text, model="m", usage={}, reason="tool_calls", tool_calls=calls))
    return events


@settings(max_examples=100)
@given(call_turns(), st.booleans())
def test_every_call_stream_is_the_same_bytes_and_answer_either_way(
    events: list[Event], legacy: bool
) -> None:
    """A client's tool calls as they form: each call's head, its argument fragments, calls
    interleaved, the rest sent at the end; also as legacy ``function_call`` deltas."""
    for make in (lambda: chat_wire(legacy), responses_wire):
        if legacy and make is responses_wire:
            continue
        fast, slow, done, reference = both_ways(make, events)
        assert fast == slow
        assert done.answer() == reference.answer()


THINKING = st.one_of(
    st.builds(ReasoningDelta, words, st.booleans()),
    st.builds(TextDelta, words),
    st.just(StreamReset("falling back to b", "b")),
)


@settings(max_examples=100)
@given(st.lists(THINKING, max_size=12))
def test_reasoning_streams_the_same_bytes_and_answer_either_way(middle: list[Event]) -> None:
    """Raw reasoning and a provider's summary, between texts and across replays."""
    events = [TurnStarted("t1", "m"), *middle, TurnEnded("", model="m", usage={}, reason="stop")]
    for make in (chat_wire, responses_wire):
        fast, slow, done, reference = both_ways(make, events)
        assert fast == slow
        assert done.answer() == reference.answer()


def test_the_fast_lane_carries_the_common_case() -> None:
    """What proxied streams are made of skips the objects: reasoning and text that only grow
    what the client reads (after each one's first delta), a call's arguments after its head."""
    for wire in (chat_wire(), responses_wire()):
        wire.frames(TurnStarted("t1", "m"))
        wire.frames(ReasoningDelta("hmm"))
        assert wire.encoder.reasoning_frame(ReasoningDelta(", so")) is not None
        wire.frames(TextDelta("first"))
        fast = [wire.encoder.text_frame(f" tok{i}") for i in range(3)]
        assert all(frame is not None for frame in fast)
        wire.frames(ToolCallDelta(0, '{"q":', "call_1", "lookup"))
        assert wire.encoder.call_frame(ToolCallDelta(0, '"x"}')) is not None
        call = {"id": "call_1", "name": "lookup", "arguments": '{"q":"x"}'}
        wire.frames(TurnEnded("", model="m", usage={}, reason="tool_calls", tool_calls=[call]))
        status, body = wire.answer()
        assert status == 200
        text = "".join(itertools.chain(["first"], (f" tok{i}" for i in range(3))))
        if isinstance(wire, ChatWire):
            message = body["choices"][0]["message"]
            assert message["content"] == text
            assert message["reasoning_content"] == "hmm, so"
            assert message["tool_calls"][0]["function"]["arguments"] == call["arguments"]
        else:
            assert body["output"][0]["content"][0]["text"] == "hmm, so"
            assert body["output"][1]["content"][0]["text"] == text
            assert body["output"][2]["arguments"] == call["arguments"]

"""``Turn.deliver(sink)``: the API server's way to read a turn, one task wake-up cheaper per
delta than ``async for`` — the turn's own task hands a streamed delta's events to the waiting
consumer's sink. The same events in the same order, and nothing a sink does there may cut an
event, time the provider out, or go unreported."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from iris.agent import Agent, TurnRequest
from iris.events import Event, ReasoningDelta, TextDelta, TurnEnded, TurnStarted
from tests.agent.turns import USER, collect, texts
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, gated, hold, text

pytestmark = pytest.mark.timeout(20)


def same(events: list[Event]) -> list[Event]:
    """Events with the turn's random id left out."""
    return [replace(e, turn_id="") if isinstance(e, TurnStarted) else e for e in events]


async def test_deliver_gives_the_events_async_for_gives_and_the_first_delta_at_once(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    agent = Agent(make_config(upstream.base_url))
    chunks = ("<think>plan", "ning</think>Hel", "lo", " world")
    upstream.script(text(*chunks), gated(*chunks, after=1))
    expected = await collect(agent, TurnRequest(messages=USER))
    got: list[Event] = []
    reader = asyncio.current_task()
    from_turn: list[bool] = []

    async def sink(event: Event) -> None:
        got.append(event)
        if isinstance(event, TextDelta | ReasoningDelta):
            from_turn.append(asyncio.current_task() is not reader)
            if len(from_turn) == 1:  # the first delta came while the rest is held upstream
                upstream.release()

    async with agent.run(TurnRequest(messages=USER)) as turn:
        await turn.deliver(sink)
    await agent.aclose()
    assert texts(got) == "Hello world"
    assert from_turn[0]  # handed over by the turn's own task, the reader waiting
    assert same(got) == same(expected)
    assert isinstance(got[-1], TurnEnded) and got[-1].reasoning == "planning"


async def test_a_sink_slower_than_the_model_timeout_does_not_time_the_provider_out(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    agent = Agent(make_config(upstream.base_url, model={"timeout": 0.5}))
    upstream.script(text("slow ", "client ", "here"))
    got: list[Event] = []

    async def sink(event: Event) -> None:
        got.append(event)
        if event == TextDelta("slow "):
            await asyncio.sleep(1.2)  # a client whose socket is full: the write waits

    async with agent.run(TurnRequest(messages=USER)) as turn:
        await turn.deliver(sink)
    await agent.aclose()
    end = got[-1]
    assert isinstance(end, TurnEnded), end
    assert end.reason == "stop" and end.text == "slow client here" == texts(got)


async def test_an_interrupt_while_a_delta_is_going_out_lets_it_out_whole(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    agent = Agent(make_config(upstream.base_url))
    upstream.script(hold("Thinking ", "about it"))
    got: list[Event] = []
    writing = asyncio.Event()
    written = asyncio.Event()

    async def sink(event: Event) -> None:
        if event == TextDelta("Thinking "):
            writing.set()
            await written.wait()  # the write is under way when the interrupt comes
        got.append(event)

    async with agent.run(TurnRequest(messages=USER)) as turn:
        reading = asyncio.create_task(turn.deliver(sink))
        await asyncio.wait_for(writing.wait(), 5)
        turn.interrupt()
        written.set()
        await asyncio.wait_for(reading, 5)
    await agent.aclose()
    end = got[-1]
    assert isinstance(end, TurnEnded) and end.reason == "interrupted"
    assert TextDelta("Thinking ") in got
    assert end.text == texts(got).strip()  # what the turn keeps is what the client got
    assert upstream.disconnected.wait(2)


async def test_a_sink_that_fails_in_the_turns_task_fails_the_reader(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    agent = Agent(make_config(upstream.base_url))
    upstream.script(hold("Hello", " there"))
    reader = asyncio.current_task()

    async def sink(event: Event) -> None:
        if isinstance(event, TextDelta):
            assert asyncio.current_task() is not reader  # raised in the turn's task
            raise ConnectionResetError("the client went away")

    with pytest.raises(ConnectionResetError):
        async with agent.run(TurnRequest(messages=USER)) as turn:
            await turn.deliver(sink)
    await agent.aclose()
    assert upstream.disconnected.wait(2)  # leaving the turn closed the upstream request

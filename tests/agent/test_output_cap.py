"""The output cap of a turn (``model.max_output_chars``, issue 10, finding 8): past it the turn
stops reading the upstream, closes it, and ends with ``reason="length"`` and the capped text."""

from __future__ import annotations

import pytest

from iris.agent import Agent, TurnRequest
from iris.events import SegmentEnded, ToolStarted, TurnEnded
from tests.agent.turns import USER, collect, texts
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, hold, reasoning, text, tool_call

pytestmark = pytest.mark.timeout(20)


async def test_a_long_stream_is_cut_at_the_cap_and_the_upstream_closed(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    # The upstream would go on forever (held open): only the cap ends this turn.
    upstream.script(hold(*["0123456789"] * 8))
    agent = Agent(make_config(upstream.base_url, model={"max_output_chars": 25}))
    events = await collect(agent, TurnRequest(messages=USER))
    await agent.aclose()
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.reason == "length"
    assert texts(events) == "0123456789012345678901234"
    assert end.text == "0123456789012345678901234"
    assert SegmentEnded(end.text) in events
    assert end.messages == [{"role": "assistant", "content": end.text}]
    assert upstream.disconnected.wait(5)


async def test_text_up_to_the_cap_is_a_normal_answer(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    upstream.script(text("0123456789", "0123456789"))
    agent = Agent(make_config(upstream.base_url, model={"max_output_chars": 20}))
    events = await collect(agent, TurnRequest(messages=USER))
    await agent.aclose()
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.reason == "stop"
    assert end.text == "01234567890123456789"


async def test_the_cap_counts_the_whole_turn_across_rounds(
    upstream: FakeUpstream,
    make_config: MakeConfig,
) -> None:
    upstream.script(
        tool_call("read_file", ['{"path": "nope"}'], content="first part "),
        hold("second", " part", " and more"),
    )
    agent = Agent(make_config(upstream.base_url, model={"max_output_chars": 20}))
    events = await collect(agent, TurnRequest(messages=USER))
    await agent.aclose()
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.reason == "length"
    assert any(isinstance(e, ToolStarted) for e in events)
    assert texts(events) == "first part second pa"
    assert end.text == "second pa"


async def test_endless_reasoning_is_capped_too(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    upstream.script(reasoning(["thinking " * 5] * 10, ["never shown"], gate_after=10))
    agent = Agent(make_config(upstream.base_url, model={"max_output_chars": 100}))
    events = await collect(agent, TurnRequest(messages=USER))
    await agent.aclose()
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.reason == "length"
    assert end.text == "" and len(end.reasoning) <= 100
    assert upstream.disconnected.wait(5)

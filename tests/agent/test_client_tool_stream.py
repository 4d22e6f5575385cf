"""Client-defined tool calls stream as they form (``ToolCallDelta``), on both wire APIs, and a
round whose call began streaming is never replayed by a retry or a fallback."""

from __future__ import annotations

import pytest

from iris.agent import TurnRequest
from iris.events import ToolCallDelta, TurnEnded, TurnFailed
from tests.agent.providers import PROVIDERS, make_agent, run_turn
from tests.agent.turns import USER, collect
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, text, tool_call, tool_calls

pytestmark = pytest.mark.timeout(30)

WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_client_call_streams_head_then_each_fragment(
    upstream: FakeUpstream, make_config: MakeConfig, provider: str
) -> None:
    upstream.script(
        tool_calls([("get_weather", ['{"city"', ': "Paris"}']), ("get_weather", ["{}"])])
    )
    request = TurnRequest(messages=USER, client_tools=[WEATHER], agent_tools=False)
    events = await run_turn(make_config, upstream, provider, request)
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(d.index, d.call_id, d.name) for d in deltas if d.call_id] == [
        (0, "call_1", "get_weather"),
        (1, "call_2", "get_weather"),
    ]
    # The head is sent once; every later fragment has neither id nor name.
    assert [(d.index, d.arguments) for d in deltas if not d.call_id] == [
        (0, '{"city"'),
        (0, ': "Paris"}'),
        (1, "{}"),
    ]
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.reason == "tool_calls"
    for index, call in enumerate(end.tool_calls):
        streamed = "".join(d.arguments for d in deltas if d.index == index)
        assert streamed == call["arguments"]
    assert end.tool_calls[0]["arguments"] == '{"city": "Paris"}'


async def test_the_agent_own_tools_never_stream_as_client_calls(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    upstream.script(tool_call("read_file", ['{"path": "x"}']), text("done"))
    agent = make_agent(make_config, upstream, "chat_completions")
    try:
        events = await collect(agent, TurnRequest(messages=USER))
    finally:
        await agent.aclose()
    assert not [e for e in events if isinstance(e, ToolCallDelta)]


async def test_max_tool_calls_streams_only_the_calls_returned(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    upstream.script(tool_calls([("get_weather", ["{}"]), ("get_weather", ["{}"])]))
    request = TurnRequest(
        messages=USER, client_tools=[WEATHER], agent_tools=False, max_tool_calls=1
    )
    events = await run_turn(make_config, upstream, "chat_completions", request)
    assert {e.index for e in events if isinstance(e, ToolCallDelta)} == {0}
    end = events[-1]
    assert isinstance(end, TurnEnded) and len(end.tool_calls) == 1


async def test_a_stream_cut_after_a_call_began_fails_and_does_not_fall_back(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    # The client has the call's head: a fallback's different call could not replace it.
    upstream.script(tool_call("get_weather", ['{"ci'], end="drop"), text("from the fallback"))
    fallback = {"base_url": upstream.base_url, "name": "backup", "api_key": "sk", "timeout": 5}
    request = TurnRequest(messages=USER, client_tools=[WEATHER], agent_tools=False)
    events = await run_turn(make_config, upstream, "chat_completions", request, fallback=[fallback])
    end = events[-1]
    assert isinstance(end, TurnFailed), end
    assert [e.call_id for e in events if isinstance(e, ToolCallDelta)] == ["call_1", ""]
    assert upstream.pending == 1, "the fallback was asked after the call was streamed"


async def test_a_stream_cut_before_any_call_still_falls_back(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    upstream.script(text(end="drop"), tool_call("get_weather", ["{}"]))
    fallback = {"base_url": upstream.base_url, "name": "backup", "api_key": "sk", "timeout": 5}
    request = TurnRequest(messages=USER, client_tools=[WEATHER], agent_tools=False)
    events = await run_turn(make_config, upstream, "chat_completions", request, fallback=[fallback])
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.reason == "tool_calls", end

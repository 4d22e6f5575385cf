"""Upstream faults end the turn with a clear provider error, on both wire APIs, streamed or not:
a 200 that is not the API's answer, a hang, a cut stream, text that is not valid Unicode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from iris.agent import TurnRequest
from iris.events import ReasoningDelta, TextDelta, TurnEnded, TurnFailed
from tests.agent.providers import PROVIDERS, make_agent, run_turn
from tests.agent.turns import USER, collect
from tests.conftest import MakeConfig
from tests.fakes.upstream import (
    FakeUpstream,
    Scenario,
    drop,
    empty_200,
    ends_early,
    garbage,
    hang_after_first,
    hold,
    html_200,
    lone_surrogate,
    not_sse_200,
    reasoning,
    text,
)

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("garbage", [html_200, empty_200, not_sse_200])
async def test_a_200_that_is_not_the_apis_answer_fails_the_turn(
    upstream: FakeUpstream,
    make_config: MakeConfig,
    provider: str,
    stream: bool,
    garbage: type[Scenario],
) -> None:
    upstream.script(garbage(), garbage())  # a failed stream is asked once more, not streamed
    events = await run_turn(
        make_config, upstream, provider, TurnRequest(messages=USER, stream=stream)
    )
    end = events[-1]
    assert isinstance(end, TurnFailed), end
    assert end.code == "provider_bad_response"
    assert "200" in end.message
    assert not any(isinstance(e, TextDelta) for e in events)


async def test_a_200_carrying_an_error_object_reports_the_providers_message(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    upstream.script(garbage(b'{"error": {"message": "model overloaded"}}', "application/json"))
    events = await run_turn(
        make_config, upstream, "chat_completions", TurnRequest(messages=USER, stream=False)
    )
    end = events[-1]
    assert isinstance(end, TurnFailed), end
    assert end.message == "provider error: model overloaded"


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("cut", [drop, ends_early], ids=["socket-cut", "ended-without-finish"])
async def test_a_stream_that_stops_before_its_finish_is_a_lost_connection_not_a_stop(
    upstream: FakeUpstream, make_config: MakeConfig, provider: str, cut: type[Scenario]
) -> None:
    # Cut mid-body, or a clean end of the body with no finish_reason / [DONE] /
    # response.completed (a proxy that gave up): either way the reply was not finished.
    upstream.script(cut("Hel", "lo"))
    events = await run_turn(make_config, upstream, provider, TurnRequest(messages=USER))
    end = events[-1]
    assert isinstance(end, TurnFailed), end
    assert end.code == "provider_unreachable"
    assert end.partial_text == "Hello"


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("hang", [hang_after_first, lambda: hold()])
async def test_a_hung_upstream_fails_the_round_once_within_the_deadline(
    upstream: FakeUpstream, make_config: MakeConfig, provider: str, hang: type[Scenario]
) -> None:
    # A second scenario would be the non-streamed retry: after a timeout there must be none.
    upstream.script(hang(), text("never asked"))
    agent = make_agent(make_config, upstream, provider, timeout=1)
    try:
        events = await asyncio.wait_for(collect(agent, TurnRequest(messages=USER)), 15)
    finally:
        upstream.release()
        await agent.aclose()
    end = events[-1]
    assert isinstance(end, TurnFailed), end
    assert end.code == "provider_timeout"
    assert len(upstream.requests) == 1
    assert upstream.pending == 1


async def test_a_timeout_falls_back_to_the_next_endpoint(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    upstream.script(hold(), text("from the fallback"))
    fallback = {"base_url": upstream.base_url, "name": "backup", "api_key": "sk", "timeout": 5}
    agent = make_agent(make_config, upstream, "chat_completions", timeout=1, fallback=[fallback])
    try:
        events = await asyncio.wait_for(collect(agent, TurnRequest(messages=USER)), 15)
    finally:
        upstream.release()
        await agent.aclose()
    end = events[-1]
    assert isinstance(end, TurnEnded), end
    assert end.text == "from the fallback"


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [True, False])
async def test_lone_surrogates_in_deltas_become_replacement_characters(
    upstream: FakeUpstream, make_config: MakeConfig, provider: str, stream: bool
) -> None:
    upstream.script(lone_surrogate())
    events = await run_turn(
        make_config, upstream, provider, TurnRequest(messages=USER, stream=stream)
    )
    end = events[-1]
    assert isinstance(end, TurnEnded), end
    assert end.text == "Hi \ufffd there"
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    shown.encode()  # valid text: every surface can write it


async def test_a_surrogate_pair_split_across_deltas_is_joined(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    upstream.script(reasoning(["think \ud83d", "\ude00"], ["a \ud83d", "\ude00 b"]))
    events = await run_turn(make_config, upstream, "chat_completions", TurnRequest(messages=USER))
    end = events[-1]
    assert isinstance(end, TurnEnded), end
    assert end.text == "a \U0001f600 b"
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "think \U0001f600"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_user_text_with_a_lone_surrogate_reaches_the_provider_repaired(
    upstream: FakeUpstream, make_config: MakeConfig, provider: str, tmp_path: Path
) -> None:
    upstream.script(text("ok"))
    agent = make_agent(make_config, upstream, provider)
    messages = [{"role": "user", "content": [{"type": "text", "text": "bad \udc80 text"}]}]
    try:
        events = await collect(agent, TurnRequest(messages=messages, instructions="x\ud800"))
    finally:
        await agent.aclose()
    assert isinstance(events[-1], TurnEnded), events[-1]
    sent = str(upstream.requests[0].body)
    assert "bad \ufffd text" in sent
    assert "x\ufffd" in sent

"""The agent core end to end: the real openai SDK against the scripted fake upstream."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from iris.agent import Agent, TurnRequest, run_with_callback
from iris.config import Config
from iris.events import (
    Commentary,
    Event,
    ReasoningDelta,
    SegmentEnded,
    StreamReset,
    TextDelta,
    ToolEnded,
    ToolStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from tests.agent.turns import USER, collect, texts
from tests.conftest import MakeConfig
from tests.fakes.upstream import (
    FakeUpstream,
    drop,
    error,
    gated,
    hold,
    reasoning,
    reject_stream,
    stream_error,
    text,
    tool_call,
)

pytestmark = pytest.mark.timeout(20)


def last(events: list[Event]) -> Event:
    return events[-1]


@pytest.fixture
async def agent(upstream: FakeUpstream, make_config: MakeConfig, tmp_path: Path):
    # Commands run in the sandbox, in the shared workspace tmp_path/ws.
    workspace = {"workspace": str(tmp_path / "ws"), "workspace_scope": "shared"}
    config = make_config(upstream.base_url, tools={"terminal": workspace})
    agent = Agent(config)
    yield agent
    await agent.aclose()


async def test_text_streams_before_upstream_finishes(agent: Agent, upstream: FakeUpstream) -> None:
    upstream.script(gated("Hel", "lo", " world", after=1))
    async with agent.run(TurnRequest(messages=USER)) as turn:
        events = aiter(turn)
        assert isinstance(await anext(events), TurnStarted)
        first = await asyncio.wait_for(anext(events), 5)
        assert first == TextDelta("Hel")
        assert not upstream.finished.is_set()  # the rest is still held upstream
        upstream.release()
        rest = [event async for event in events]
    assert texts([first, *rest]) == "Hello world"
    assert rest[-2:] == [SegmentEnded("Hello world"), rest[-1]]
    end = rest[-1]
    assert isinstance(end, TurnEnded)
    assert end.text == "Hello world" and end.reason == "stop" and end.model == "fake-model"
    assert end.usage == {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    body = upstream.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_fields_become_reasoning_events(
    agent: Agent, upstream: FakeUpstream, field: str
) -> None:
    upstream.script(reasoning(["Let me ", "think."], ["The answer", " is 4."], field=field))
    events = await collect(agent, TurnRequest(messages=USER))
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Let me think."
    assert texts(events) == "The answer is 4."
    end = last(events)
    assert isinstance(end, TurnEnded) and end.reasoning == "Let me think."


async def test_think_tags_split_across_chunks_never_leak(
    agent: Agent, upstream: FakeUpstream
) -> None:
    upstream.script(
        text("<thi", "nk>plan the ", "answer</th", "ink>\n\nThe ", "answer <", "b>is</b> 4.")
    )
    events = await collect(agent, TurnRequest(messages=USER))
    for event in events:
        if isinstance(event, TextDelta):
            assert "<" not in event.text or event.text.startswith("<b") or "b>" in event.text
            assert "think" not in event.text and "/th" not in event.text
    assert texts(events) == "The answer <b>is</b> 4."
    end = last(events)
    assert isinstance(end, TurnEnded)
    assert end.text == "The answer <b>is</b> 4." and end.reasoning == "plan the answer"


async def test_tool_call_fragments_run_the_tool_then_answer(
    agent: Agent, upstream: FakeUpstream, tmp_path: Path
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "marker.txt").write_text("x")
    upstream.script(
        tool_call("terminal", ['{"comm', 'and": "ls', ' -1"}'], content="Let me look."),
        text("There is ", "one file."),
    )
    events = await collect(agent, TurnRequest(messages=USER))
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("Commentary") < kinds.index("ToolStarted") < kinds.index("ToolEnded")
    assert Commentary("Let me look.") in events
    started = next(e for e in events if isinstance(e, ToolStarted))
    assert (
        started.index == 1 and started.name == "terminal" and started.args == {"command": "ls -1"}
    )
    ended = next(e for e in events if isinstance(e, ToolEnded))
    assert ended.ok and "marker.txt" in ended.output_preview
    end = last(events)
    assert isinstance(end, TurnEnded) and end.text == "There is one file."
    # The model saw the tool's output in the second request.
    second = upstream.requests[1].body["messages"]
    assert second[-1]["role"] == "tool" and "marker.txt" in second[-1]["content"]
    assert second[-2]["tool_calls"][0]["function"]["arguments"] == '{"command": "ls -1"}'
    assert [m["role"] for m in end.messages] == ["assistant", "tool", "assistant"]


async def test_invalid_tool_arguments_are_a_tool_error_the_model_sees(
    agent: Agent, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("terminal", ['{"command": ', "oops"]), text("Sorry."))
    events = await collect(agent, TurnRequest(messages=USER))
    ended = next(e for e in events if isinstance(e, ToolEnded))
    assert not ended.ok and "not valid JSON" in ended.output_preview
    assert "not valid JSON" in upstream.requests[1].body["messages"][-1]["content"]
    assert isinstance(last(events), TurnEnded)


async def test_drop_after_text_keeps_shown_text_and_reports(
    agent: Agent, upstream: FakeUpstream
) -> None:
    upstream.script(drop("Partial ", "answer"))
    events = await collect(agent, TurnRequest(messages=USER))
    assert texts(events) == "Partial answer"
    assert SegmentEnded("Partial answer") in events
    end = last(events)
    assert isinstance(end, TurnFailed)
    assert end.code == "provider_unreachable" and end.partial_text == "Partial answer"
    assert len(upstream.requests) == 1  # no retry that could duplicate the text


async def test_drop_before_text_retries_without_streaming(
    agent: Agent, upstream: FakeUpstream
) -> None:
    upstream.script(drop(), text("Whole ", "answer"))
    events = await collect(agent, TurnRequest(messages=USER))
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta("Whole answer")]
    assert not any(isinstance(e, StreamReset) for e in events)
    assert upstream.requests[1].body.get("stream") in (None, False)
    end = last(events)
    assert isinstance(end, TurnEnded) and end.text == "Whole answer"


async def test_interrupt_closes_upstream_within_a_second(
    agent: Agent, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Thinking ", "about it"))
    async with agent.run(TurnRequest(messages=USER)) as turn:
        seen = ""
        async for event in turn:
            if isinstance(event, TextDelta):
                seen += event.text
                if seen == "Thinking about it":
                    interrupted_at = time.monotonic()
                    turn.interrupt()
            if isinstance(event, TurnEnded):
                end = event
    assert upstream.disconnected.wait(2)
    assert upstream.disconnected_at is not None
    assert upstream.disconnected_at - interrupted_at < 1.0
    assert end.reason == "interrupted" and end.text == "Thinking about it"


async def test_rate_limit_falls_back_to_next_model(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    with FakeUpstream() as backup:
        config = make_config(upstream.base_url)
        config.model.fallback = [
            config.model.model_copy(update={"base_url": backup.base_url, "name": "backup-model"})
        ]
        upstream.script(error(429, "slow down", retry_after=3))
        backup.script(text("From ", "backup"))
        agent = Agent(config)
        events = await collect(agent, TurnRequest(messages=USER))
        await agent.aclose()
    assert not any(isinstance(e, StreamReset) for e in events)  # nothing was shown yet
    end = last(events)
    assert isinstance(end, TurnEnded) and end.text == "From backup" and end.model == "backup-model"
    assert backup.requests[0].body["model"] == "backup-model"


async def test_drop_after_text_with_fallback_resets_the_stream(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    config = make_config(upstream.base_url)
    config.model.fallback = [config.model.model_copy(update={"name": "backup-model"})]
    upstream.script(drop("Half a"), text("A whole answer"))
    agent = Agent(config)
    events = await collect(agent, TurnRequest(messages=USER))
    await agent.aclose()
    reset = next(i for i, e in enumerate(events) if isinstance(e, StreamReset))
    after = events[reset + 1 :]
    assert texts(events[:reset]) == "Half a"
    assert texts(after) == "A whole answer"
    end = last(events)
    assert isinstance(end, TurnEnded) and end.text == "A whole answer"


async def test_server_error_without_fallback_fails_cleanly(
    agent: Agent, upstream: FakeUpstream
) -> None:
    upstream.script(error(500, "boom"))
    events = await collect(agent, TurnRequest(messages=USER))
    end = last(events)
    assert isinstance(end, TurnFailed)
    assert end.code == "provider_server_error" and end.retryable and "500" in end.message


async def test_rate_limit_without_fallback_fails_with_the_providers_retry_after(
    agent: Agent, upstream: FakeUpstream
) -> None:
    upstream.script(error(429, "slow down", retry_after=2.5))
    end = last(await collect(agent, TurnRequest(messages=USER)))
    assert isinstance(end, TurnFailed) and end.code == "rate_limited" and end.retryable
    assert end.retry_after == 2.5  # the API surface passes it on to its client


async def test_auth_error_is_reported(agent: Agent, upstream: FakeUpstream) -> None:
    upstream.script(error(401, "bad key"))
    end = last(await collect(agent, TurnRequest(messages=USER)))
    assert isinstance(end, TurnFailed) and end.code == "provider_auth" and "401" in end.message


async def test_unreachable_provider_is_reported(make_config: MakeConfig) -> None:
    agent = Agent(make_config("http://127.0.0.1:9/v1"))
    end = last(await collect(agent, TurnRequest(messages=USER)))
    await agent.aclose()
    assert isinstance(end, TurnFailed) and end.code == "provider_unreachable"


async def test_streaming_rejection_is_remembered_for_a_bounded_time(
    agent: Agent, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream.script(reject_stream(), text("Once."), text("Twice."), text("Thrice."))
    first = last(await collect(agent, TurnRequest(messages=USER)))
    assert isinstance(first, TurnEnded) and first.text == "Once."
    second = last(await collect(agent, TurnRequest(messages=USER)))
    assert isinstance(second, TurnEnded) and second.text == "Twice."
    assert [r.stream for r in upstream.requests] == [True, False, False]
    # After the TTL the model is asked to stream again.
    # The agent's clock only: patching ``time.monotonic`` itself would also freeze the fake
    # upstream's event loop (its thread reads the same function), which then cannot stop.
    now = time.monotonic()
    monkeypatch.setattr("iris.agent.core.time", SimpleNamespace(monotonic=lambda: now + 601))
    await collect(agent, TurnRequest(messages=USER))
    assert upstream.requests[-1].stream is True


async def test_non_streaming_request_delivers_once(agent: Agent, upstream: FakeUpstream) -> None:
    upstream.script(text("All ", "at ", "once"))
    events = await collect(agent, TurnRequest(messages=USER, stream=False))
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta("All at once")]
    assert upstream.requests[0].stream is False


async def test_client_tools_are_returned_not_run(agent: Agent, upstream: FakeUpstream) -> None:
    weather = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    }
    upstream.script(tool_call("get_weather", ['{"city":', ' "Paris"}'], call_id="call_w"))
    events = await collect(agent, TurnRequest(messages=USER, client_tools=[weather]))
    assert not any(isinstance(e, ToolStarted) for e in events)
    end = last(events)
    assert isinstance(end, TurnEnded) and end.reason == "tool_calls"
    assert end.tool_calls == [
        {"id": "call_w", "name": "get_weather", "arguments": '{"city": "Paris"}'}
    ]
    assert [t["function"]["name"] for t in upstream.requests[0].body["tools"]] == ["get_weather"]


async def test_terminal_never_runs_for_a_user_who_is_not_allowed(
    agent: Agent, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(tool_call("terminal", ['{"command": "touch pwned"}']), text("ok"))
    events = await collect(agent, TurnRequest(messages=USER, allow_terminal=False))
    offered = [t["function"]["name"] for t in upstream.requests[0].body["tools"]]
    assert "terminal" not in offered
    ended = next(e for e in events if isinstance(e, ToolEnded))
    assert not ended.ok and "not allowed" in ended.output_preview
    assert not (tmp_path / "pwned").exists()


async def test_max_iterations_forces_an_answer(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    config = make_config(upstream.base_url, tools={"max_iterations": 2})
    upstream.script(tool_call("read_file", ['{"path": "nope"}']), text("Done."))
    agent = Agent(config)
    events = await collect(agent, TurnRequest(messages=USER))
    await agent.aclose()
    assert "tools" not in upstream.requests[1].body  # the last round must answer
    end = last(events)
    assert isinstance(end, TurnEnded) and end.text == "Done."


async def test_stream_callback_gets_deltas_then_none_once(
    agent: Agent, upstream: FakeUpstream
) -> None:
    upstream.script(text("a", "b", "c"))
    got: list[str | None] = []

    def callback(delta: str | None) -> None:
        got.append(delta)
        if delta == "b":
            raise RuntimeError("a consumer bug")

    end = await run_with_callback(agent, TurnRequest(messages=USER), callback)
    assert got == ["a", "b", "c", None]
    assert isinstance(end, TurnEnded) and end.text == "abc"


async def test_responses_api_mode(upstream: FakeUpstream, make_config: MakeConfig) -> None:
    from tests.fakes.upstream import responses_text, responses_tool_call

    config: Config = make_config(upstream.base_url)
    config.model.provider = "responses"
    upstream.script(
        responses_tool_call("read_file", ['{"pa', 'th": "x.txt"}'], call_id="call_r"),
        responses_text("Fi", "ne.", reasoning=["Summ", "ary"]),
    )
    agent = Agent(config)
    events = await collect(agent, TurnRequest(messages=USER))
    await agent.aclose()
    assert all(r.path.endswith("/responses") for r in upstream.requests)
    started = next(e for e in events if isinstance(e, ToolStarted))
    assert started.args == {"path": "x.txt"}
    second_input: list[dict[str, Any]] = upstream.requests[1].body["input"]
    assert second_input[-1]["type"] == "function_call_output"
    assert second_input[-1]["call_id"] == "call_r"
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Summary"
    end = last(events)
    assert isinstance(end, TurnEnded) and end.text == "Fine." and end.reasoning == "Summary"
    assert json.loads(json.dumps(end.usage)) == end.usage


async def test_in_band_stream_error_keeps_shown_text(agent: Agent, upstream: FakeUpstream) -> None:
    upstream.script(stream_error("Half ", "way", message="model overloaded"))
    events = await collect(agent, TurnRequest(messages=USER))
    end = last(events)
    assert isinstance(end, TurnFailed)
    assert "model overloaded" in end.message and end.partial_text == "Half way"
    assert texts(events) == "Half way"

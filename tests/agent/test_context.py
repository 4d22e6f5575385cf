"""The context budget: what the model receives when a chat outgrows its window.

Pure parts (cuts, overflow wordings, calibration) are fed lists; the turn runs against the
scripted fake upstream with a context limit that answers like OpenAI.
"""

from __future__ import annotations

from typing import Any

import pytest

from iris.agent import Agent, TurnRequest
from iris.agent.context import (
    DEFAULT_CHARS_PER_TOKEN,
    NOTE,
    RATIO_RANGE,
    SUMMARY_PREFIX,
    Gauge,
    cut_index,
    is_overflow,
)
from iris.errors import ProviderError, ProviderHTTPError
from iris.events import Commentary, Event, TextDelta, TurnEnded, TurnFailed
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, Received, error, text

pytestmark = pytest.mark.timeout(20)


def user(text_: str) -> dict[str, Any]:
    return {"role": "user", "content": text_}


def assistant(text_: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text_}


def is_summary_request(request: Received) -> bool:
    messages = request.body.get("messages") or []
    return bool(messages) and "You compress conversations" in str(messages[0].get("content"))


async def collect(agent: Agent, request: TurnRequest) -> tuple[list[Event], Any]:
    events: list[Event] = []
    async with agent.run(request) as turn:
        async for event in turn:
            events.append(event)
    return events, turn.compaction


# -- pure parts ----------------------------------------------------------------------------------
def test_a_cut_never_splits_a_tool_exchange() -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]
    messages = [
        user("q1"),
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        assistant("a1"),
        user("q2"),
    ]
    sizes = [10, 10, 10, 10, 10, 10]
    # Room for 35: the user boundary at 5 fits; a cut at 3 or 4 would orphan tool results.
    assert cut_index(messages, sizes, 35) == 5
    assert cut_index(messages, sizes, 1000) == 0
    # The question and what the turn added after it are never cut, whatever the room.
    assert cut_index(messages, sizes, 5) == 5
    assert cut_index(messages[2:], sizes[2:], 5) == 3  # no earlier user message: only its own


@pytest.mark.parametrize(
    ("status", "message", "body", "overflow"),
    [
        (400, "bad", '{"error": {"code": "context_length_exceeded"}}', True),
        (400, "This model's maximum context length is 8192 tokens", "", True),
        (400, "prompt is too long: 210000 tokens > 200000 maximum", "", True),
        (413, "too many tokens in the request", "", True),
        (400, "input exceeds the context window", "", True),
        (400, "temperature must be at most 2", "", False),
        (500, "context window", "", False),  # a server error is not the request's length
    ],
)
def test_overflow_is_recognised_in_the_usual_wordings(
    status: int, message: str, body: str, overflow: bool
) -> None:
    assert is_overflow(ProviderHTTPError(status, message, body)) is overflow


def test_the_embedded_models_wording_is_an_overflow() -> None:
    error_ = ProviderError("the embedded model failed: Requested tokens exceed context window")
    assert is_overflow(error_)


def test_the_gauge_calibrates_from_usage_and_learns_a_smaller_window() -> None:
    gauge = Gauge()
    assert gauge.ratio("m") == DEFAULT_CHARS_PER_TOKEN
    gauge.observe("m", 500, 400)  # a small request is mostly framing: it does not count
    assert gauge.ratio("m") == DEFAULT_CHARS_PER_TOKEN
    gauge.observe("m", 4000, 1008, messages=2)  # less 4 tokens of framing per message
    assert gauge.ratio("m") == 4.0
    gauge.observe("m", 6000, 3000)  # averaged with the last figure
    assert gauge.ratio("m") == 3.0
    gauge.observe("m", 4000, 10)  # an implausible report stays within the range
    assert gauge.ratio("m") <= RATIO_RANGE[1]
    assert gauge.window("m", 32_000) == 32_000
    gauge.overflowed("m", 10_000)  # the provider refused a request of ~10 000 tokens
    assert gauge.window("m", 32_000) == 9_000
    assert gauge.window("other", 32_000) == 32_000


# -- turns against the scripted upstream ---------------------------------------------------------
async def test_old_turns_become_a_summary_the_model_receives(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    config = make_config(upstream.base_url, model={"context_window": 2000, "max_tokens": 200})
    agent = Agent(config)
    history: list[dict[str, Any]] = []
    for n in range(6):
        history += [user(f"question {n}"), assistant(f"answer {n} " + "x" * 900)]
    upstream.script(text("the user asked six questions"), text("fresh answer"))
    try:
        request = TurnRequest(
            [*history, user("and now?")], agent_tools=False, fit_context=True, show_compaction=True
        )
        events, compaction = await collect(agent, request)
    finally:
        await agent.aclose()
    summary_request, answer_request = upstream.requests
    assert is_summary_request(summary_request)
    assert "question 0" in summary_request.body["messages"][1]["content"]
    sent = answer_request.body["messages"]
    assert sent[0]["role"] == "system"
    assert sent[0]["content"] == SUMMARY_PREFIX + "the user asked six questions"
    assert sent[-1] == user("and now?")
    assert user("question 0") not in sent
    assert sum(len(str(m["content"])) for m in sent) < 3 * (2000 - 200)
    assert compaction is not None and compaction.summary == "the user asked six questions"
    assert history[compaction.replaced :] == [m for m in sent[1:-1]]
    # Devices are told; the summary is never part of the answer.
    assert Commentary(NOTE) in events
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "fresh answer"
    assert isinstance(events[-1], TurnEnded) and events[-1].text == "fresh answer"


async def test_a_providers_too_long_compacts_and_retries_once(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    # The config claims a big window: only the provider knows better.
    config = make_config(upstream.base_url, model={"context_window": 100_000})
    agent = Agent(config)
    upstream.context_limit = 6000
    history: list[dict[str, Any]] = []
    for n in range(5):
        history += [user(f"question {n}"), assistant("y" * 1500)]
    upstream.script(text("summary of it"), text("answered"))
    try:
        events, compaction = await collect(
            agent, TurnRequest([*history, user("next")], agent_tools=False, fit_context=True)
        )
    finally:
        await agent.aclose()
    assert len(upstream.refused) == 1
    assert isinstance(events[-1], TurnEnded) and events[-1].text == "answered"
    assert compaction is not None and compaction.replaced > 0
    assert upstream.requests[-1].body["messages"][0]["content"].endswith("summary of it")


async def test_a_second_too_long_fails_with_a_clear_code_and_no_loop(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    config = make_config(upstream.base_url, model={"compaction": "truncate"})
    agent = Agent(config)
    upstream.context_limit = 100
    try:
        events, _ = await collect(
            agent,
            TurnRequest(
                [user("a"), assistant("b"), user("z" * 500)], agent_tools=False, fit_context=True
            ),
        )
    finally:
        await agent.aclose()
    assert len(upstream.refused) == 2  # the request, one retry, nothing more
    failed = events[-1]
    assert isinstance(failed, TurnFailed) and failed.code == "context_length_exceeded"


async def test_without_fit_context_a_too_long_is_the_callers(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    agent = Agent(make_config(upstream.base_url))
    upstream.script(error(400, "maximum context length exceeded", code="context_length_exceeded"))
    try:
        events, compaction = await collect(agent, TurnRequest([user("hi")], agent_tools=False))
    finally:
        await agent.aclose()
    assert compaction is None and len(upstream.requests) == 1
    assert isinstance(events[-1], TurnFailed) and events[-1].code == "context_length_exceeded"


async def test_a_failed_summary_falls_back_to_dropping_old_turns(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    config = make_config(upstream.base_url, model={"context_window": 1000, "max_tokens": 100})
    agent = Agent(config)
    history = [user("old"), assistant("o" * 3000)]
    upstream.script(error(400, "no summaries today"), text("still here"))
    try:
        events, compaction = await collect(
            agent, TurnRequest([*history, user("new")], agent_tools=False, fit_context=True)
        )
    finally:
        await agent.aclose()
    assert isinstance(events[-1], TurnEnded) and events[-1].text == "still here"
    assert upstream.requests[-1].body["messages"] == [user("new")]
    assert compaction is not None and compaction.summary == "" and compaction.replaced == 2


async def test_the_window_comes_from_the_providers_model_listing(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    # No window configured: the default (32 768) would send all 12 000 characters; the
    # listing says the model reads 2 000 tokens, so the old turns are compacted.
    upstream.listing = {"context_length": 2000}
    config = make_config(upstream.base_url, model={"max_tokens": 200})
    agent = Agent(config)
    history: list[dict[str, Any]] = []
    for n in range(6):
        history += [user(f"question {n}"), assistant(f"answer {n} " + "x" * 1900)]
    upstream.script(text("six questions"), text("fresh"), text("again"))
    try:
        for question in ("and now?", "and then?"):
            request = TurnRequest([*history, user(question)], agent_tools=False, fit_context=True)
            await collect(agent, request)
    finally:
        await agent.aclose()
    assert is_summary_request(upstream.requests[0])
    assert user("question 0") not in upstream.requests[1].body["messages"]
    assert upstream.listings == 1  # asked once per model, not per turn


async def test_a_configured_window_caps_what_the_listing_says(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.listing = {"max_model_len": 1_000_000}
    config = make_config(upstream.base_url, model={"context_window": 2000, "max_tokens": 200})
    agent = Agent(config)
    history = [m for n in range(6) for m in (user(f"q{n}"), assistant("x" * 1900))]
    upstream.script(text("summary"), text("fresh"))
    try:
        await collect(agent, TurnRequest([*history, user("now?")], fit_context=True))
    finally:
        await agent.aclose()
    assert is_summary_request(upstream.requests[0])

"""Ask before acting, in the agent core: the real openai SDK against the scripted fake upstream,
a real ``terminal`` command, and the broker answered the way a surface answers it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iris.agent import Agent, TurnRequest
from iris.agent.approvals import ApprovalPolicy
from iris.config import ConfigError, config_from_dict
from iris.events import (
    ApprovalRequested,
    ApprovalResolved,
    Event,
    ToolEnded,
    ToolStarted,
    TurnEnded,
)
from iris.state.approvals import Approvals, Decision, MemoryApprovals, RespondResult
from tests.agent.turns import USER
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(20)

COMMAND = "echo ran >> runs.txt"
CALL = tool_call("terminal", [f'{{"command": "{COMMAND}"}}'])


@pytest.fixture
async def agent(upstream: FakeUpstream, make_config: MakeConfig, tmp_path: Path):
    config = make_config(
        upstream.base_url,
        tools={
            "terminal": {"workspace": str(tmp_path / "ws"), "workspace_scope": "shared"},
            "approval": {"mode": "ask", "timeout": 30},
        },
    )
    agent = Agent(config)
    yield agent
    await agent.aclose()


def runs(tmp_path: Path) -> int:
    marker = tmp_path / "ws" / "runs.txt"  # the shared workspace the commands run in
    return marker.read_text().count("ran") if marker.exists() else 0


Answer = Callable[[Approvals, ApprovalRequested], Awaitable[Any]]


async def turn_answered(
    agent: Agent, approvals: Approvals, answer: Answer | None, chat_id: str = "chat1"
) -> list[Event]:
    """Run one turn; when it asks, ``answer`` (a surface's part) is called with the request."""
    events: list[Event] = []
    request = TurnRequest(messages=USER, approvals=approvals, chat_id=chat_id)
    answering: list[asyncio.Task[Any]] = []
    async with agent.run(request) as turn:
        async for event in turn:
            events.append(event)
            if isinstance(event, ApprovalRequested) and answer is not None:
                answering.append(asyncio.create_task(answer(approvals, event)))
    await asyncio.gather(*answering)
    return events


def broker(agent: Agent, **changes: Any) -> Approvals:
    config = agent.config.tools.approval.model_copy(update=changes)
    return MemoryApprovals(ApprovalPolicy.configured(config))


def tool_result(upstream: FakeUpstream) -> str:
    """What the model was told the tool returned (the second request's last message)."""
    message = upstream.requests[1].body["messages"][-1]
    assert message["role"] == "tool"
    return str(message["content"])


def answering(decision: Decision, by: str = "alice") -> Answer:
    async def answer(approvals: Approvals, request: ApprovalRequested) -> RespondResult:
        return await approvals.respond(request.approval_id, decision, by)

    return answer


async def test_approved_once_the_command_runs_once(
    agent: Agent, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL, text("Done."))
    approvals = broker(agent)
    events = await turn_answered(agent, approvals, answering("once"))
    asked = next(e for e in events if isinstance(e, ApprovalRequested))
    assert asked.name == "terminal" and asked.index == 1
    # The whole command, then how it will run: the person answers for both.
    runs_in = f"(runs in the sandbox: workspace {tmp_path / 'ws'}, no network)"
    assert asked.preview == f"{COMMAND}\n\n{runs_in}"
    assert asked.args == f'{{"command": "{COMMAND}"}}'
    kinds = [type(e) for e in events]
    assert kinds.index(ToolStarted) < kinds.index(ApprovalRequested)
    assert kinds.index(ApprovalResolved) < kinds.index(ToolEnded)
    assert ApprovalResolved(asked.approval_id, "once", "alice") in events
    assert runs(tmp_path) == 1
    assert not tool_result(upstream).startswith("not approved")
    assert await approvals.pending("chat1") == []


async def test_denied_never_runs_and_the_model_is_told_not_to_work_around_it(
    agent: Agent, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL, text("Understood."))
    events = await turn_answered(agent, broker(agent), answering("deny", "bob"))
    assert runs(tmp_path) == 0
    result = tool_result(upstream)
    assert result.startswith("not approved (denied by bob)")
    assert "do not try to work around it" in result.lower()
    ended = next(e for e in events if isinstance(e, ToolEnded))
    assert not ended.ok
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.text == "Understood."


async def test_nobody_answers_it_times_out_and_never_runs(
    agent: Agent, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL, text("Nobody said yes."))
    approvals = broker(agent, timeout=0.3)
    events = await turn_answered(agent, approvals, None)
    resolved = next(e for e in events if isinstance(e, ApprovalResolved))
    assert resolved.decision == "timeout" and resolved.by == "timeout"
    assert runs(tmp_path) == 0
    assert "silence is not consent" in tool_result(upstream)
    # An answer after the timeout is told what ended it.
    assert await approvals.respond(resolved.approval_id, "once", "late") == "already_decided"
    found = await approvals.resolution(resolved.approval_id)
    assert found is not None and found.decision == "timeout"


async def test_two_answers_at_once_one_decides_the_other_is_told(
    agent: Agent, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL, text("ok"))
    results: list[RespondResult] = []

    async def both(approvals: Approvals, request: ApprovalRequested) -> None:
        results.extend(
            await asyncio.gather(
                approvals.respond(request.approval_id, "deny", "phone"),
                approvals.respond(request.approval_id, "once", "laptop"),
            )
        )

    events = await turn_answered(agent, broker(agent), both)
    assert sorted(results) == ["already_decided", "decided"]
    resolved = [e for e in events if isinstance(e, ApprovalResolved)]
    assert len(resolved) == 1 and resolved[0].by == "phone" and resolved[0].decision == "deny"
    assert runs(tmp_path) == 0


async def test_chat_decision_lets_the_tool_run_unasked_until_the_session_starts_over(
    agent: Agent, upstream: FakeUpstream, tmp_path: Path
) -> None:
    approvals = broker(agent)
    upstream.script(CALL, text("one"), CALL, text("two"), CALL, text("other chat"))
    first = await turn_answered(agent, approvals, answering("chat"))
    assert (
        ApprovalResolved(
            next(e for e in first if isinstance(e, ApprovalRequested)).approval_id, "chat", "alice"
        )
        in first
    )
    second = await turn_answered(agent, approvals, None)
    assert not any(isinstance(e, ApprovalRequested) for e in second)
    assert runs(tmp_path) == 2
    # Another chat is asked again (nobody answers it: refused).
    approvals.policy = ApprovalPolicy("ask", (), 0.2)
    other = await turn_answered(agent, approvals, None, chat_id="chat2")
    assert any(isinstance(e, ApprovalRequested) for e in other)
    assert runs(tmp_path) == 2
    await approvals.new_session("chat1")
    assert await approvals.asks("chat1", "terminal")


async def test_interrupt_while_waiting_ends_the_turn_and_closes_the_request(
    agent: Agent, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL)
    approvals = broker(agent)
    events: list[Event] = []
    request = TurnRequest(messages=USER, approvals=approvals, chat_id="chat1")
    async with agent.run(request) as turn:
        async for event in turn:
            events.append(event)
            if isinstance(event, ApprovalRequested):
                assert [r.approval_id for r in await approvals.pending("chat1")] == [
                    event.approval_id
                ]
                turn.interrupt()
    asked = next(e for e in events if isinstance(e, ApprovalRequested))
    assert ApprovalResolved(asked.approval_id, "cancelled", "interrupt") in events
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.reason == "interrupted"
    assert runs(tmp_path) == 0
    assert await approvals.pending("chat1") == []
    assert await approvals.respond(asked.approval_id, "once", "late") == "already_decided"
    assert await approvals.respond("appr_0000", "once", "x") == "unknown"


async def test_mode_off_and_auto_globs_run_unasked(
    agent: Agent, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL, text("a"), CALL, text("b"))
    for approvals in (broker(agent, mode="off"), broker(agent, auto=["term*"])):
        events = await turn_answered(agent, approvals, None)
        assert not any(isinstance(e, ApprovalRequested | ApprovalResolved) for e in events)
    assert runs(tmp_path) == 2


async def test_a_turn_with_nobody_to_ask_refuses_the_tool(
    agent: Agent, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL, text("I could not."))
    async with agent.run(TurnRequest(messages=USER)) as turn:
        events = [e async for e in turn]
    assert runs(tmp_path) == 0
    assert not any(isinstance(e, ApprovalRequested) for e in events)
    result = tool_result(upstream)
    assert result.startswith("not approved") and "nobody can be asked here" in result


def test_the_policy_config_defaults_and_errors() -> None:
    config = config_from_dict({}, env={})
    policy = ApprovalPolicy.configured(config.tools.approval)
    assert policy == ApprovalPolicy("ask", (), 120.0)
    assert policy.asks("terminal") and policy.asks("mcp_files_write")
    assert not policy.asks("read_file")
    with pytest.raises(ConfigError, match=r"tools\.approval\.mode"):
        config_from_dict({"tools": {"approval": {"mode": "smart"}}}, env={})
    with pytest.raises(ConfigError, match=r"tools\.approval\.timeout"):
        config_from_dict({"tools": {"approval": {"timeout": 0}}}, env={})


names = st.from_regex(r"(terminal|read_file|mcp_[a-z]{1,6}_[a-z]{1,6})", fullmatch=True)


@given(names, st.lists(st.sampled_from(["terminal", "mcp_*", "mcp_files_*", "read_*"])))
def test_a_tool_asks_exactly_when_it_acts_and_no_auto_glob_names_it(
    name: str, auto: list[str]
) -> None:
    from fnmatch import fnmatchcase

    policy = ApprovalPolicy("ask", tuple(auto), 1.0)
    acts = name == "terminal" or name.startswith("mcp_")
    assert policy.asks(name) == (acts and not any(fnmatchcase(name, g) for g in auto))
    assert not ApprovalPolicy("off", tuple(auto), 1.0).asks(name)


async def test_an_mcp_tool_asks_too_and_runs_only_once_approved(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    from tests.fakes.mcp_launch import stdio

    config = make_config(
        upstream.base_url, mcp_servers={"fake": stdio()}, tools={"approval": {"mode": "ask"}}
    )
    agent = Agent(config)
    try:
        await agent.start_tools()
        approvals = MemoryApprovals(ApprovalPolicy.configured(config.tools.approval))
        step = tool_call("mcp_fake_steps", ['{"n": 1, "seconds": 0.1}'])
        upstream.script(step, text("denied"), step, text("ran"))
        denied = await turn_answered(agent, approvals, answering("deny"))
        asked = next(e for e in denied if isinstance(e, ApprovalRequested))
        assert asked.name == "mcp_fake_steps"
        # The arguments, whole, then where the call runs.
        arguments = '{\n  "n": 1,\n  "seconds": 0.1\n}'
        assert asked.preview == f"{arguments}\n\n(runs by the MCP server fake, on the host)"
        assert tool_result(upstream).startswith("not approved")
        await turn_answered(agent, approvals, answering("once"))
        ran = upstream.requests[3].body["messages"][-1]
        assert ran["role"] == "tool" and ran["content"] == "steps done"
    finally:
        await agent.aclose()

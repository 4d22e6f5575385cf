"""Approvals across processes: two ``iris serve`` on one real Redis. The turn runs on A; an
answer given to B reaches it through the shared store, and when devices on A and B answer at
once, one answer wins for both."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai import BadRequestError, OpenAI

from iris.agent import Agent, TurnRequest
from iris.agent.approvals import ApprovalPolicy
from iris.events import ApprovalRequested
from iris.state.approvals import RedisApprovals
from iris.state.redis_store import RedisStore
from tests.agent.turns import USER
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.scale.conftest import RedisServer, serve_on_redis, socket_url
from tests.scale.devices import device
from tests.socket.conftest import TOKEN

pytestmark = pytest.mark.timeout(60)

COMMAND = "echo ran >> runs.txt"
CALL = tool_call("terminal", [f'{{"command": "{COMMAND}"}}'])


def runs(work: Path) -> int:
    marker = work / "runs.txt"
    return marker.read_text().count("ran") if marker.exists() else 0


@pytest.fixture
def two(
    tmp_path: Path, redis_server: RedisServer, upstream: FakeUpstream
) -> Iterator[tuple[str, str, Path]]:
    """Two ``iris serve`` on ``redis_server`` asking before ``terminal``; their iris socket
    URLs and the terminal's folder."""
    work = tmp_path / "work"
    work.mkdir()
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        redis_server,
        platforms={"iris": {"enabled": True, "tokens": [TOKEN]}},
        streaming={"enabled": True},
        tools={
            "terminal": {"workspace": str(work), "workspace_scope": "shared"},
            "approval": {"mode": "ask", "timeout": 30},
        },
    ) as running:
        yield socket_url(running[0][1]), socket_url(running[1][1]), work


def respond(approval_id: str, decision: str) -> dict[str, Any]:
    return {"type": "approval.respond", "approval_id": approval_id, "decision": decision}


async def test_an_answer_given_to_the_other_process_reaches_the_turn(
    two: tuple[str, str, Path], upstream: FakeUpstream
) -> None:
    upstream.script(CALL, text("It ran."))
    a_url, b_url, work = two
    on_a, on_b = await device(a_url), await device(b_url)
    await on_a.send({"type": "message.send", "text": "go"})  # the turn runs on A
    asked = (await on_b.until("approval.request", within=10))[-1]
    assert asked["preview"].startswith(f"{COMMAND}\n\n(runs in the sandbox") and runs(work) == 0
    await on_b.send(respond(asked["approval_id"], "once"))
    frames = await on_a.turn(within=10)
    resolved = [f for f in frames if f["type"] == "approval.resolved"]
    assert [(f["decision"], f["by"]) for f in resolved] == [("once", "token")]
    assert runs(work) == 1
    await on_a.close()
    await on_b.close()


async def test_a_device_resuming_past_the_log_on_the_other_process_sees_the_request(
    two: tuple[str, str, Path], upstream: FakeUpstream
) -> None:
    """The turn asks on A; a device that resumes on B past the log's reach gets a ``sync``,
    which carries the request from the shared broker, and its answer runs the tool on A."""
    upstream.script(CALL, text("It ran."))
    a_url, b_url, work = two
    on_a = await device(a_url)
    await on_a.send({"type": "message.send", "text": "go"})
    asked = (await on_a.until("approval.request", within=10))[-1]
    late = await device(b_url, after_seq=asked["seq"] + 1000)  # ahead of the log: a sync
    sync = (await late.until("sync", within=10))[-1]
    assert [a["approval_id"] for a in sync["approvals"]] == [asked["approval_id"]]
    await late.send(respond(sync["approvals"][0]["approval_id"], "once"))
    await on_a.turn(within=10)
    assert runs(work) == 1
    await on_a.close()
    await late.close()


async def test_devices_on_both_processes_answer_at_once_one_wins(
    two: tuple[str, str, Path], upstream: FakeUpstream
) -> None:
    upstream.script(CALL, text("ok"))
    a_url, b_url, work = two
    on_a, on_b = await device(a_url), await device(b_url)
    await on_a.send({"type": "message.send", "text": "go"})
    approval_id = (await on_a.until("approval.request", within=10))[-1]["approval_id"]
    await on_b.until("approval.request", within=10)
    await asyncio.gather(
        on_a.send(respond(approval_id, "deny")), on_b.send(respond(approval_id, "once"))
    )
    a_frames, b_frames = await on_a.turn(within=10), await on_b.turn(within=10)
    a_resolved = [f for f in a_frames if f["type"] == "approval.resolved"]
    b_resolved = [f for f in b_frames if f["type"] == "approval.resolved"]
    assert len(a_resolved) == 1 and [f["decision"] for f in b_resolved] == [
        a_resolved[0]["decision"]
    ]
    told = [
        f["code"]
        for f in [*on_a.frames, *on_b.frames]
        if f["type"] == "error" and f["code"].startswith("approval")
    ]
    assert told == ["approval_decided"]  # the one that lost, wherever it was
    assert runs(work) == (1 if a_resolved[0]["decision"] == "once" else 0)
    await on_a.close()
    await on_b.close()


async def test_the_first_answer_wins_atomically_among_many_brokers(
    redis_server: RedisServer,
) -> None:
    """Eight brokers on one Redis (as eight processes would be) answer one request at once:
    exactly one is ``decided``; the waiting turn gets that answer."""
    stores = [RedisStore(redis_server.url, prefix="t") for _ in range(9)]
    try:
        policy = ApprovalPolicy("ask", (), 30.0)
        asking, *others = [RedisApprovals(policy, store) for store in stores]
        request = asking.request(1, "terminal", {"command": "ls"})
        assert isinstance(request, ApprovalRequested)
        waiting = asyncio.create_task(asking.wait("chat:x", request))
        for _ in range(500):  # until the request is in Redis (another process's view)
            if await others[0].pending("chat:x"):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the request never reached the shared store")
        decisions = ["once", "deny", "chat", "once", "deny", "chat", "once", "deny"]
        results = await asyncio.gather(
            *(
                broker.respond(request.approval_id, d, f"p{n}")  # type: ignore[arg-type]
                for n, (broker, d) in enumerate(zip(others, decisions, strict=True))
            )
        )
        assert sorted(results).count("decided") == 1
        won = results.index("decided")
        resolution = await asyncio.wait_for(waiting, 5)
        assert (resolution.decision, resolution.by) == (decisions[won], f"p{won}")
        assert await others[3].pending("chat:x") == []
        # A request of another chat is unknown to an answer from this one.
        assert await others[0].respond(request.approval_id, "once", "x", chat_id="chat:y") == (
            "unknown"
        )
    finally:
        for store in stores:
            await store.aclose()


class SlowToShare(RedisApprovals):
    """A broker whose write of a new request to Redis takes a while (a busy store)."""

    async def _open(self, chat_id: str, request: ApprovalRequested) -> None:
        await asyncio.sleep(0.3)
        await super()._open(chat_id, request)


async def test_a_request_is_in_the_shared_store_before_any_device_is_shown_it(
    redis_server: RedisServer, upstream: FakeUpstream, make_config: MakeConfig, tmp_path: Path
) -> None:
    """A device that sees ``approval.request`` and resumes on the other process at once (a
    ``sync`` read from Redis) finds the request there, however slow the write: the turn keeps
    the request in the store before it shows it."""
    upstream.script(CALL, text("ok"))
    config = make_config(
        upstream.base_url,
        tools={
            "terminal": {"workspace": str(tmp_path / "ws"), "workspace_scope": "shared"},
            "approval": {"mode": "ask", "timeout": 30},
        },
    )
    policy = ApprovalPolicy.configured(config.tools.approval)
    here, there = RedisStore(redis_server.url, prefix="t"), RedisStore(redis_server.url, prefix="t")
    asking, other = SlowToShare(policy, here), RedisApprovals(policy, there)
    agent = Agent(config)
    asked: list[str] = []
    seen: list[list[str]] = []
    try:
        request = TurnRequest(messages=USER, approvals=asking, chat_id="chat:x")
        async with agent.run(request) as turn:
            async for event in turn:
                if isinstance(event, ApprovalRequested):
                    asked.append(event.approval_id)
                    seen.append([r.approval_id for r in other.pending_now("chat:x")])
                    assert await other.respond(event.approval_id, "deny", "b") == "decided"
        assert len(asked) == 1 and seen == [asked]
    finally:
        await agent.aclose()
        await here.aclose()
        await there.aclose()


async def test_a_request_nobody_could_be_shown_is_closed_for_every_process(
    redis_server: RedisServer,
) -> None:
    """Opened, then the owner's devices could not be reached (a voice turn): the request is
    closed in the store, so no device is shown it later and no answer to it is taken."""
    here, there = RedisStore(redis_server.url, prefix="t"), RedisStore(redis_server.url, prefix="t")
    try:
        policy = ApprovalPolicy("ask", (), 30.0)
        asking, other = RedisApprovals(policy, here), RedisApprovals(policy, there)
        request = asking.request(1, "terminal", {"command": "ls"})
        await asking.open("chat:x", request)
        assert [r.approval_id for r in await other.pending("chat:x")] == [request.approval_id]
        await asking.abandon(request.approval_id)
        assert await other.pending("chat:x") == []
        assert await other.respond(request.approval_id, "once", "b") == "already_decided"
        assert await asking.pending("chat:x") == []
    finally:
        await here.aclose()
        await there.aclose()


API_KEY = "sk-approvals-processes-0123456789"


@pytest.fixture
def two_apis(
    tmp_path: Path, redis_server: RedisServer, upstream: FakeUpstream
) -> Iterator[tuple[str, str, Path]]:
    """Two ``iris serve`` on ``redis_server`` serving the API with agent tools that ask; their
    API base URLs and the terminal's folder."""
    work = tmp_path / "work"
    work.mkdir()
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        redis_server,
        platforms={"api_server": {"api_key": API_KEY}, "iris": {"enabled": False}},
        tools={
            "terminal": {"workspace": str(work), "workspace_scope": "shared"},
            "approval": {"mode": "ask", "timeout": 30},
        },
    ) as running:
        yield f"{running[0][1]}/v1", f"{running[1][1]}/v1", work


def approval_response(approval_id: str, approve: bool) -> Any:
    return [
        {"type": "mcp_approval_response", "approval_request_id": approval_id, "approve": approve}
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_an_mcp_approval_response_sent_to_the_other_process_continues_the_turn(
    two_apis: tuple[str, str, Path], upstream: FakeUpstream, stream: bool
) -> None:
    """An API turn held for an ``mcp_approval_response`` lives in the process that began it; the
    answer sent to another one (a load balancer without sticky sessions) was a 404
    ``approval_unknown``. Now it is recorded there, the turn goes on where it runs, and the
    answering request gets the rest of the turn, streamed or whole."""
    upstream.script(CALL, text("It ", "ran."))
    a_url, b_url, work = two_apis
    with (
        OpenAI(base_url=a_url, api_key=API_KEY, max_retries=0, timeout=20) as a,
        OpenAI(base_url=b_url, api_key=API_KEY, max_retries=0, timeout=20) as b,
    ):
        first = a.responses.create(model="iris-agent", input="go")
        asked = first.output[-1]
        assert asked.type == "mcp_approval_request" and runs(work) == 0
        answer = approval_response(asked.id, True)
        if stream:
            with b.responses.stream(
                model="iris-agent", previous_response_id=first.id, input=answer
            ) as events:
                kinds = [event.type for event in events]
                second = events.get_final_response()
            assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        else:
            second = b.responses.create(
                model="iris-agent", previous_response_id=first.id, input=answer
            )
        assert second.output_text == "It ran." and second.status == "completed"
        assert runs(work) == 1
        # Stored like any response: continued on either process.
        assert b.responses.retrieve(second.id).output_text == "It ran."
        again = b.responses.create
        with pytest.raises(BadRequestError) as late:
            again(model="iris-agent", previous_response_id=first.id, input=answer)
        assert late.value.code == "approval_decided"
    upstream.assert_used_up()

"""Any process serves any A2A task (issue 44): two ``iris serve`` processes on one real
redis-server, the official ``a2a-sdk`` client. A stream started on A whose connection dropped
is resubscribed on B and goes on from the task's stored reply with no gap and no repeat; a
task waiting for an approval on A is answered by the client's message on B and completes
there, the turn going on where it runs; a ``tasks/cancel`` sent to B stops the turn running on A
and the task ends ``canceled`` on both."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)

from tests.conftest import anywhere, shared_workspace
from tests.fakes.scenarios import gated, hold
from tests.fakes.served import Served
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.scale.conftest import RedisServer, serve_on_redis
from tests.scale.devices import STREAMING
from tests.scale.processes import until_async
from tests.socket.a2a_peers import KEY, reply_text, user
from tests.socket.conftest import TOKEN

pytestmark = pytest.mark.timeout(90)

COMMAND = "echo ran >> runs.txt"


@pytest.fixture
def two(
    tmp_path: Path, redis_server: RedisServer, upstream: FakeUpstream
) -> Iterator[list[tuple[Served, str]]]:
    """Two ``iris serve`` processes sharing ``redis_server``, the A2A server on both."""
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        redis_server,
        streaming=STREAMING,
        platforms={
            "iris": {"enabled": True, "tokens": [TOKEN]},
            "a2a": {"enabled": True, "api_key": KEY},
        },
        tools={"terminal": shared_workspace(tmp_path), "approval": {"mode": "ask", "timeout": 30}},
    ) as running:
        yield running


@contextlib.asynccontextmanager
async def a2a_client(url: str, *, streaming: bool = True) -> AsyncIterator[Client]:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    client = await create_client(
        url, client_config=ClientConfig(httpx_client=http, streaming=streaming)
    )
    try:
        yield client
    finally:
        await client.close()
        await http.aclose()


async def test_a_stream_dropped_on_one_process_resumes_on_the_other_without_gap_or_repeat(
    two: list[tuple[Served, str]], upstream: FakeUpstream
) -> None:
    upstream.script(gated("First", " second", " third", after=1))
    (_, a_url), (_, b_url) = two
    task_id = ""
    async with a2a_client(a_url) as on_a:
        async for event in on_a.send_message(user("go on", context_id="moved")):
            if event.HasField("artifact_update"):
                task_id = event.artifact_update.task_id
                break  # the connection to A drops after the first chunk
    resumed: list[StreamResponse] = []
    async with a2a_client(b_url) as on_b:
        async for event in on_b.subscribe(SubscribeToTaskRequest(id=task_id)):
            resumed.append(event)
            if len(resumed) == 1:
                upstream.release()  # the rest is made only once the client is on B

        async def stored() -> bool:  # A, the task's owner, stores its end
            fetched = await on_b.get_task(GetTaskRequest(id=task_id))
            return fetched.status.state == TaskState.TASK_STATE_COMPLETED

        await until_async(stored, "the completed task in the store")
        fetched = await on_b.get_task(GetTaskRequest(id=task_id))
    snapshot = resumed[0].task
    assert snapshot.id == task_id and reply_text(snapshot) == "First"
    pieces = [e.artifact_update for e in resumed if e.HasField("artifact_update")]
    assert "".join(p.artifact.parts[0].text for p in pieces) == " second third"
    assert all(p.append for p in pieces)
    assert resumed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert reply_text(fetched) == "First second third"


async def test_an_approval_asked_on_one_process_is_answered_by_the_message_sent_to_the_other(
    two: list[tuple[Served, str]], upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(
        tool_call("terminal", [json.dumps({"command": COMMAND})], content="Checking."),
        text("It ran."),
    )
    (_, a_url), (_, b_url) = two
    async with a2a_client(a_url, streaming=False) as on_a:
        asked = [a async for a in on_a.send_message(user("run it", context_id="ap"))][-1].task
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert not anywhere(tmp_path, "runs.txt")
    async with a2a_client(b_url, streaming=False) as on_b:
        answer = user("yes", context_id="ap", task_id=asked.id)
        done = [a async for a in on_b.send_message(answer)][-1].task
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert reply_text(done) == "Checking.\n\nIt ran."
    assert anywhere(tmp_path, "runs.txt")


async def test_a_cancel_sent_to_one_process_stops_the_turn_running_on_the_other(
    two: list[tuple[Served, str]], upstream: FakeUpstream
) -> None:
    upstream.script(hold("Partial"))  # the upstream cannot finish: only a cancel ends it
    (_, a_url), (_, b_url) = two
    started: asyncio.Queue[str] = asyncio.Queue()
    streamed: list[StreamResponse] = []
    async with a2a_client(a_url) as on_a, a2a_client(b_url) as on_b:

        async def stream_on_a() -> None:
            async for event in on_a.send_message(user("long job", context_id="stop")):
                streamed.append(event)
                if event.HasField("artifact_update") and started.empty():
                    started.put_nowait(event.artifact_update.task_id)

        streaming = asyncio.create_task(stream_on_a())
        try:
            task_id = await asyncio.wait_for(started.get(), 10)
            cancelled = await on_b.cancel_task(CancelTaskRequest(id=task_id))
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED

            async def cut() -> bool:  # the turn on A stopped: its model stream went away
                return upstream.disconnected.is_set()

            await until_async(cut, "the turn on A to stop")
            await asyncio.wait_for(streaming, 10)  # A's stream ends: the reply does not go on
        finally:
            streaming.cancel()
        for client in (on_a, on_b):

            async def ended(client: Client = client) -> bool:
                fetched = await client.get_task(GetTaskRequest(id=task_id))
                return fetched.status.state == TaskState.TASK_STATE_CANCELED

            await until_async(ended, "the canceled task in the store")
        fetched = await on_a.get_task(GetTaskRequest(id=task_id))
    assert streamed[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
    assert reply_text(fetched) == "Partial"

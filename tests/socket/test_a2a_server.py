"""The A2A server: the official ``a2a-sdk`` client against ``iris serve`` on 127.0.0.1, the real
agent against the scripted upstream; a device on the iris socket sees the same chats."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)

from tests.fakes.scenarios import gated, hold
from tests.fakes.upstream import FakeUpstream, text
from tests.socket.conftest import IrisServer, StartServer

pytestmark = pytest.mark.timeout(60)

KEY = "a2a-key-0123456789abcdef"


def base_url(server: IrisServer) -> str:
    return server.url.replace("ws://", "http://").replace("/iris/ws", "")


async def a2a_server(iris_server: StartServer, **a2a: Any) -> IrisServer:
    return await iris_server(
        streaming={"enabled": True}, a2a={"enabled": True, "api_key": KEY, **a2a}
    )


@contextlib.asynccontextmanager
async def a2a_client(
    server: IrisServer, *, streaming: bool = True, polling: bool = False
) -> AsyncIterator[Client]:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    config = ClientConfig(httpx_client=http, streaming=streaming, polling=polling)
    client = await create_client(base_url(server), client_config=config)
    try:
        yield client
    finally:
        await client.close()
        await http.aclose()


def user(
    text_: str, context_id: str | None = None, task_id: str | None = None
) -> SendMessageRequest:
    message = Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_USER,
        parts=[Part(text=text_)],
        context_id=context_id or "",
        task_id=task_id or "",
    )
    return SendMessageRequest(message=message)


def reply_text(task: Any) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


async def test_the_agent_card_names_skills_streaming_push_and_the_bearer_scheme(
    iris_server: StartServer,
) -> None:
    server = await a2a_server(
        iris_server, name="Helper", skills=[{"id": "code", "name": "Code", "tags": ["dev"]}]
    )
    async with httpx.AsyncClient() as http:
        card = (await http.get(base_url(server) + "/.well-known/agent-card.json")).json()
    assert card["name"] == "Helper"
    assert [s["id"] for s in card["skills"]] == ["code"]
    assert card["capabilities"] == {"streaming": True, "pushNotifications": True}
    assert card["supportedInterfaces"][0]["url"] == base_url(server) + "/a2a"
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"


async def test_a_blocking_send_returns_the_completed_task_and_the_chat_keeps_it(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("Hello", " agent"))
    server = await a2a_server(iris_server)
    async with a2a_client(server, streaming=False) as client:
        answers = [a async for a in client.send_message(user("hi", context_id="ctx1"))]
        task = answers[-1].task
        fetched = await client.get_task(GetTaskRequest(id=task.id))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert reply_text(task) == "Hello agent"
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED and fetched.context_id == "ctx1"
    history = await server.surface.runtime.sessions.history("iris:a2a-ctx1")
    assert [m["content"] for m in history] == ["hi", "Hello agent"]


async def test_a_non_blocking_send_returns_at_once_and_the_task_finishes_later(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(gated("Slow", " reply", after=1))
    server = await a2a_server(iris_server)
    async with a2a_client(server, streaming=False, polling=True) as client:
        answers = [a async for a in client.send_message(user("go"))]
        first = answers[-1].task
        assert first.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
        upstream.release()
        async with asyncio.timeout(10):
            while True:
                task = await client.get_task(GetTaskRequest(id=first.id))
                if task.status.state == TaskState.TASK_STATE_COMPLETED:
                    break
                await asyncio.sleep(0.05)
    assert reply_text(task) == "Slow reply"


async def test_stream_says_working_then_text_arrives_before_the_model_finishes(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(gated("First", " then more", after=1))
    server = await a2a_server(iris_server)
    events: list[StreamResponse] = []
    async with a2a_client(server) as client:
        async for event in client.send_message(user("stream it")):
            events.append(event)
            chunk = event.artifact_update.artifact.parts
            if event.HasField("artifact_update") and chunk and chunk[0].text == "First":
                upstream.release()  # the model goes on only once the first text was seen
            if event.HasField("status_update") and event.status_update.status.state == (
                TaskState.TASK_STATE_COMPLETED
            ):
                break
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert "".join(c.artifact.parts[0].text for c in chunks) == "First then more"
    assert chunks[0].append is False and all(c.append for c in chunks[1:])
    assert chunks[-1].last_chunk


async def test_cancel_interrupts_the_turn_and_the_task_ends_canceled(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Partial"))
    server = await a2a_server(iris_server)
    device = await server.connect(chat_id="a2a-c2")  # a person watching the same chat
    async with a2a_client(server) as client:
        task_id = ""
        async for event in client.send_message(user("long job", context_id="c2")):
            if event.HasField("artifact_update"):
                task_id = event.artifact_update.task_id
                break
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    frames = await device.turn()  # the turn ended for the device too
    assert next(f for f in frames if f["type"] == "message.stop")["final_text"] == "Partial"
    history = await server.surface.runtime.sessions.history("iris:a2a-c2")
    assert history[-1]["content"].startswith("Partial")


async def test_a_wrong_key_is_refused(iris_server: StartServer) -> None:
    server = await a2a_server(iris_server)
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            base_url(server) + "/a2a",
            json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}},
            headers={"Authorization": "Bearer wrong"},
        )
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"

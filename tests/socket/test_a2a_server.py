"""The A2A server: the official ``a2a-sdk`` client against ``iris serve`` on 127.0.0.1, the real
agent against the scripted upstream; a device on the iris socket sees the same chats."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import httpx
import pytest
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from iris.surfaces.a2a.callbacks import signature
from tests.conftest import anywhere, shared_workspace
from tests.fakes import loopback
from tests.fakes.scenarios import gated, hold
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.socket.a2a_peers import KEY, a2a_client, a2a_server, base_url, reply_text, user
from tests.socket.conftest import StartServer

pytestmark = pytest.mark.timeout(60)


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


async def test_a_dropped_stream_resumes_by_resubscribing_without_a_gap_or_a_repeat(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(gated("First", " second", " third", after=1))
    server = await a2a_server(iris_server)
    async with a2a_client(server) as client:
        task_id = ""
        async for event in client.send_message(user("go on")):
            if event.HasField("artifact_update"):
                task_id = event.artifact_update.task_id
                break  # the connection drops after the first chunk
        resumed: list[StreamResponse] = []
        stream = client.subscribe(SubscribeToTaskRequest(id=task_id))
        async for event in stream:
            resumed.append(event)
            if len(resumed) == 1:
                upstream.release()  # the rest is made only once the client is back
            if event.HasField("status_update") and event.status_update.status.state == (
                TaskState.TASK_STATE_COMPLETED
            ):
                break
    snapshot = resumed[0].task
    assert snapshot.id == task_id
    after = [e.artifact_update for e in resumed if e.HasField("artifact_update")]
    assert reply_text(snapshot) + "".join(c.artifact.parts[0].text for c in after) == (
        "First second third"
    )
    assert all(c.append for c in after)


async def test_input_required_while_a_tool_waits_then_the_answer_continues_the_task(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    command = "echo ran >> runs.txt"
    upstream.script(
        tool_call("terminal", [json.dumps({"command": command})], content="Checking."),
        text("It ran."),
    )
    server = await iris_server(
        streaming={"enabled": True},
        a2a={"enabled": True, "api_key": KEY},
        tools={"terminal": shared_workspace(tmp_path), "approval": {"mode": "ask", "timeout": 30}},
    )
    async with a2a_client(server, streaming=False) as client:
        asked = [a async for a in client.send_message(user("run it", context_id="ap"))][-1].task
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        data = MessageToDict(asked.status.message.parts[1].data)
        assert data["name"] == "terminal" and data["args"] == {"command": command}
        assert data["decisions"] == ["once", "chat", "deny"]
        answer = user("yes", context_id="ap", task_id=asked.id)
        done = [a async for a in client.send_message(answer)][-1].task
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert reply_text(done).endswith("It ran.")
    assert anywhere(tmp_path, "runs.txt")


async def test_files_and_data_parts_reach_the_model_as_attachments(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("Read them."))
    server = await a2a_server(iris_server)
    message = Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_USER,
        parts=[
            Part(text="what do these say?"),
            Part(raw=b"the notes say hello", filename="notes.txt", media_type="text/plain"),
            Part(data=ParseDict({"order": 42}, Value())),
        ],
    )
    async with a2a_client(server, streaming=False) as client:
        task = [a async for a in client.send_message(SendMessageRequest(message=message))][-1].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    sent = json.dumps(upstream.requests[0].body["messages"][-1])
    assert "what do these say?" in sent
    assert "the notes say hello" in sent and '\\"order\\": 42' in sent


async def test_push_callbacks_are_signed_retried_and_a_private_address_is_refused(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("Pushed."))
    server = await a2a_server(iris_server)
    received: list[tuple[bytes, dict[str, str]]] = []
    done = asyncio.Event()

    async def callback(request: Request) -> Response:
        body = await request.body()
        received.append((body, dict(request.headers)))
        if len(received) == 1:
            return Response(status_code=503)  # the receiver is briefly down: tried again
        if b"TASK_STATE_COMPLETED" in body:
            done.set()
        return Response(status_code=204)

    sock = loopback.bind()
    hook = await loopback.start(
        Starlette(routes=[Route("/hook", callback, methods=["POST"])]), sock
    )
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/hook"
    try:
        async with a2a_client(server, streaming=False) as client:
            request = user("push me")
            request.configuration.CopyFrom(
                SendMessageConfiguration(
                    task_push_notification_config=TaskPushNotificationConfig(url=url, token="tok-1")
                )
            )
            [a async for a in client.send_message(request)]
            async with asyncio.timeout(10):
                await done.wait()
            refused = user("push elsewhere")
            refused.configuration.task_push_notification_config.url = "http://10.1.2.3/hook"
            with pytest.raises(A2AError):
                [a async for a in client.send_message(refused)]
    finally:
        await loopback.stop(hook)
    for body, headers in received:
        stamp = headers["x-iris-timestamp"]
        assert headers["x-iris-signature"] == signature("tok-1", stamp, body)
        assert headers["x-a2a-notification-token"] == "tok-1"
    assert any(b"Pushed." in body for body, _ in received)
    assert received[0][0] == received[1][0]  # the refused delivery came again, first


async def test_an_approval_answered_on_a_device_lets_the_next_message_continue_the_task(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(
        tool_call("terminal", [json.dumps({"command": "echo ran >> runs.txt"})]),
        text("Done."),
    )
    server = await iris_server(
        streaming={"enabled": True},
        a2a={"enabled": True, "api_key": KEY},
        tools={"terminal": shared_workspace(tmp_path), "approval": {"mode": "ask", "timeout": 30}},
    )
    device = await server.connect(chat_id="a2a-dev")
    async with a2a_client(server, streaming=False) as client:
        asked = [a async for a in client.send_message(user("run", context_id="dev"))][-1].task
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        request = (await device.until("approval.request"))[-1]
        await device.send(
            {"type": "approval.respond", "approval_id": request["approval_id"], "decision": "once"}
        )
        await device.until("approval.resolved")
        going = user("go on", context_id="dev", task_id=asked.id)
        done = [a async for a in client.send_message(going)][-1].task
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert reply_text(done) == "Done."


async def test_the_v0_3_method_names_answer_too(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("Old", " client"))
    server = await a2a_server(iris_server)
    message = {
        "role": "user",
        "parts": [{"kind": "text", "text": "hi"}],
        "messageId": uuid.uuid4().hex,
    }
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as http:
        sent = await http.post(
            base_url(server) + "/a2a",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "message/send",
                "params": {"message": message},
            },
        )
        task = sent.json()["result"]
        got = await http.post(
            base_url(server) + "/a2a",
            json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task["id"]}},
        )
    assert task["status"]["state"] == "completed"
    parts = got.json()["result"]["artifacts"][0]["parts"]  # each appended chunk is a part
    assert "".join(p["text"] for p in parts) == "Old client"

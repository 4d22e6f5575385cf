"""MCP server mode: the official ``mcp`` SDK client against ``/mcp`` on the real server (uvicorn on
127.0.0.1), the real agent against the scripted upstream, devices on the iris socket beside it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from tests.conftest import shared_workspace
from tests.fakes.scenarios import gated, hold
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.socket.conftest import TOKEN, IrisServer, StartServer

pytestmark = pytest.mark.timeout(60)

API_KEY = "sk-iris-api-key-0123456789"
TOOLS = {"chats_list", "chat_read", "chat_send", "chat_stop", "approvals_list", "approval_respond"}


def mcp_url(server: IrisServer) -> str:
    return server.url.replace("ws://", "http://").replace("/iris/ws", "/mcp")


@contextlib.asynccontextmanager
async def mcp_client(server: IrisServer, token: str = TOKEN) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(mcp_url(server), http_client=http)) as client:
        yield client


def answer(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    first = result.content[0]
    assert isinstance(first, TextContent)
    return json.loads(first.text)


def refusal(result: CallToolResult) -> str:
    assert result.is_error
    first = result.content[0]
    assert isinstance(first, TextContent)
    return first.text


async def test_the_six_tools_are_listed(iris_server: StartServer) -> None:
    server = await iris_server()
    async with mcp_client(server) as client:
        listed = await client.list_tools()
    assert {t.name for t in listed.tools} == TOOLS


async def test_chat_send_streams_the_reply_as_progress_before_it_ends_and_devices_see_it(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(gated("Hello", " from", " Iris", after=1))
    server = await iris_server(streaming={"enabled": True})
    device = await server.connect(chat_id="work")
    grown: list[str] = []
    first = asyncio.Event()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        grown.append(message or "")
        first.set()

    async with mcp_client(server) as client:
        call = asyncio.ensure_future(
            client.call_tool(
                "chat_send", {"chat_id": "work", "text": "hi"}, progress_callback=progress
            )
        )
        async with asyncio.timeout(10):
            await first.wait()
        assert not call.done()  # the model has not finished: the text came while it forms
        assert grown == ["Hello"]
        upstream.release()
        result = answer(await call)
    assert result == {"chat_id": "work", "reply": "Hello from Iris"}
    assert grown[-1] == "Hello from Iris"
    frames = await device.turn()
    echo = next(f for f in frames if f["type"] == "message")
    assert echo["role"] == "user" and echo["text"] == "hi"  # the device saw the question
    assert next(f for f in frames if f["type"] == "message.stop")["final_text"] == "Hello from Iris"


async def test_chats_list_and_chat_read_page_back_through_a_chat(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("one"), text("two"), text("three"))
    server = await iris_server()
    async with mcp_client(server) as client:
        for word in ("1", "2", "3"):
            await client.call_tool("chat_send", {"chat_id": "paged", "text": f"q{word}"})
        listed = answer(await client.call_tool("chats_list", {}))
        newest = answer(await client.call_tool("chat_read", {"chat_id": "paged", "limit": 4}))
        older = answer(
            await client.call_tool(
                "chat_read", {"chat_id": "paged", "limit": 4, "before": newest["next_before"]}
            )
        )
    assert [c["chat_id"] for c in listed["chats"]] == ["paged"]
    assert listed["chats"][0]["title"] == "q1"
    texts = [m["text"] for m in newest["messages"]]
    assert texts == ["q2", "two", "q3", "three"]
    assert newest["total"] == 6 and newest["next_before"] == 2
    assert [m["text"] for m in older["messages"]] == ["q1", "one"]
    assert older["next_before"] is None


async def test_chat_stop_interrupts_the_reply_and_keeps_its_text(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Partial"))
    server = await iris_server(streaming={"enabled": True})
    first = asyncio.Event()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        first.set()

    async with mcp_client(server) as client, mcp_client(server) as other:
        call = asyncio.ensure_future(
            client.call_tool(
                "chat_send", {"chat_id": "s", "text": "go"}, progress_callback=progress
            )
        )
        async with asyncio.timeout(10):
            await first.wait()
        stopped = answer(await other.call_tool("chat_stop", {"chat_id": "s"}))
        result = answer(await call)
        again = refusal(await other.call_tool("chat_stop", {"chat_id": "s"}))
    assert stopped == {"chat_id": "s", "stopped": True}
    assert result == {"chat_id": "s", "reply": "Partial"}  # the call ends with the turn
    assert "no_turn:" in again


async def test_an_approval_waits_until_an_mcp_client_answers_it(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    command = "echo ran >> runs.txt"
    upstream.script(
        tool_call("terminal", [json.dumps({"command": command})], content="Checking."),
        text("It ran."),
    )
    server = await iris_server(
        streaming={"enabled": True},
        tools={"terminal": shared_workspace(tmp_path), "approval": {"mode": "ask", "timeout": 30}},
    )
    asked = asyncio.Event()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        if message and message.startswith("waiting for approval"):
            asked.set()

    async with mcp_client(server) as client:
        call = asyncio.ensure_future(
            client.call_tool(
                "chat_send", {"chat_id": "a", "text": "run"}, progress_callback=progress
            )
        )
        async with asyncio.timeout(10):
            await asked.wait()
        waiting = answer(await client.call_tool("approvals_list", {}))["approvals"]
        assert [(w["chat_id"], w["name"], w["args"]) for w in waiting] == [
            ("a", "terminal", {"command": command})
        ]
        decided = answer(
            await client.call_tool(
                "approval_respond", {"approval_id": waiting[0]["approval_id"], "decision": "once"}
            )
        )
        result = answer(await call)
        late = refusal(
            await client.call_tool(
                "approval_respond", {"approval_id": waiting[0]["approval_id"], "decision": "deny"}
            )
        )
    assert decided["by"] == "device" and decided["decision"] == "once"
    assert result["reply"].endswith("It ran.")
    assert "approval_decided: already decided: once by device" in late


async def test_a_token_that_may_not_see_the_chats_is_refused(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    server = await iris_server()
    devices = server.surface.runtime.devices
    revoked = devices.add("old-phone")
    devices.revoke("old-phone")
    async with httpx2.AsyncClient() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        for token, code in (("wrong-token-0123456789", "unauthorized"), (revoked, "revoked")):
            answer_ = await http.post(
                mcp_url(server), json=body, headers={"Authorization": f"Bearer {token}"}
            )
            assert answer_.status_code == 401
            assert answer_.json()["error"]["code"] == code
        foreign = await http.post(
            mcp_url(server),
            json=body,
            headers={"Authorization": f"Bearer {TOKEN}", "Origin": "https://evil.example"},
        )
        assert foreign.status_code == 403


async def test_another_platforms_chat_and_approval_stay_unseen(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    server = await iris_server()
    sessions = server.surface.runtime.sessions
    await sessions.append("telegram:42", [{"role": "user", "content": "private"}])
    async with mcp_client(server) as client:
        listed = answer(await client.call_tool("chats_list", {}))
        unknown = refusal(
            await client.call_tool("approval_respond", {"approval_id": "nope", "decision": "once"})
        )
        bad = refusal(await client.call_tool("chat_read", {"chat_id": "no spaces"}))
    assert listed == {"chats": []}
    assert "approval_unknown:" in unknown
    assert "bad_chat_id:" in bad


async def test_iris_mcp_serve_answers_on_stdio_with_the_reply_as_progress(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    upstream.script(text("Hello", " over", " stdio", delay=0.05))
    config = tmp_path / "config.yaml"
    config.write_text(
        f"model: {{base_url: '{upstream.base_url}', name: fake-model, api_key: sk-test}}\n"
        "streaming: {enabled: true}\n"
        f"store: {{path: '{tmp_path / 'iris.db'}'}}\n"
    )
    command = StdioServerParameters(
        command=sys.executable,
        args=["-m", "iris.cli", "mcp", "serve", "--config", str(config)],
        env={**os.environ},
    )
    grown: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        grown.append(message or "")

    async with Client(command, mode="legacy") as client:
        listed = await client.list_tools()
        sent = answer(
            await client.call_tool("chat_send", {"text": "hi"}, progress_callback=progress)
        )
        chats = answer(await client.call_tool("chats_list", {}))
        read = answer(await client.call_tool("chat_read", {"chat_id": sent["chat_id"]}))
        waiting = answer(await client.call_tool("approvals_list", {}))
    assert {t.name for t in listed.tools} == TOOLS
    assert [m["text"] for m in read["messages"]] == ["hi", "Hello over stdio"]
    assert waiting == {"approvals": []}
    assert sent["reply"] == "Hello over stdio" and sent["chat_id"].startswith("mcp-")
    assert grown and grown[-1] == "Hello over stdio"
    assert [c["chat_id"] for c in chats["chats"]] == [sent["chat_id"]]


async def test_a_cancelled_chat_send_stops_the_turn(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Started"))
    server = await iris_server(streaming={"enabled": True})
    device = await server.connect(chat_id="c")
    first = asyncio.Event()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        first.set()

    async with mcp_client(server) as client:
        call = asyncio.ensure_future(
            client.call_tool(
                "chat_send", {"chat_id": "c", "text": "go"}, progress_callback=progress
            )
        )
        async with asyncio.timeout(10):
            await first.wait()
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        frames = await device.turn()  # the turn ended for the device: nobody waits for it now
    assert next(f for f in frames if f["type"] == "message.stop")["final_text"] == "Started"

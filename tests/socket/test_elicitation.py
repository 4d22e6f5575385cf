"""An MCP server asks the person for input mid-call (elicitation), on the iris socket: the real
server and agent, the fake MCP server (``tests/fakes/mcp_server.py``, written with the ``mcp``
SDK: ``ctx.elicit``) as a stdio child, the scripted model calling its tools."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.socket.conftest import Device, IrisServer, StartServer

pytestmark = pytest.mark.timeout(60)


async def serving(iris_server: StartServer, wait: float = 30) -> IrisServer:
    return await iris_server(
        streaming={"enabled": True},
        tools={"approval": {"mode": "off", "timeout": wait}},
        mcp_servers={"fake": stdio()},
    )


def told(upstream: FakeUpstream) -> str:
    """What the model was told the tool returned (the second upstream request)."""
    message = upstream.requests[1].body["messages"][-1]
    assert message["role"] == "tool"
    return str(message["content"])


async def answer(device: Device, asked: dict[str, Any], action: str, **content: Any) -> None:
    frame: dict[str, Any] = {
        "type": "elicitation.respond",
        "elicitation_id": asked["elicitation_id"],
        "action": action,
    }
    if content:
        frame["content"] = content
    await device.send(frame)


async def test_a_confirmation_is_asked_and_the_answer_reaches_the_server(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Deleted."))
    server = await serving(iris_server)
    device = await server.connect()
    await device.send({"type": "message.send", "text": "delete a.txt"})
    asked = (await device.until("elicitation.request"))[-1]
    assert (asked["server"], asked["message"]) == ("fake", "Delete a.txt?")
    assert asked["schema"]["properties"]["sure"]["type"] == "boolean"
    assert asked["schema"]["required"] == ["sure"]
    await answer(device, asked, "accept", sure=True)
    frames = await device.turn()
    resolved = next(f for f in frames if f["type"] == "elicitation.resolved")
    assert (resolved["action"], resolved["elicitation_id"]) == ("accept", asked["elicitation_id"])
    assert next(f for f in frames if f["type"] == "tool.end")["ok"] is True
    assert told(upstream) == "deleted a.txt"


async def test_an_enum_answer_outside_its_choices_is_asked_again_never_sent(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("mcp_fake_paint", ["{}"]), text("Painted."))
    server = await serving(iris_server)
    device = await server.connect()
    await device.send({"type": "message.send", "text": "paint"})
    asked = (await device.until("elicitation.request"))[-1]
    fields = asked["schema"]["properties"]
    assert fields["color"]["enum"] == ["red", "green", "blue"]
    assert set(asked["schema"]["required"]) == {"color", "coats"}
    await answer(device, asked, "accept", color="purple", coats=2)
    error = (await device.until("error"))[-1]
    assert error["code"] == "elicitation_invalid" and "'color'" in error["message"]
    await answer(device, asked, "accept", color="red", coats=9)
    error = (await device.until("error"))[-1]
    assert error["code"] == "elicitation_invalid" and "at most 5" in error["message"]
    await answer(device, asked, "accept", color="green", coats=2)
    await device.turn()
    assert told(upstream) == "painted green x2"


async def test_decline_reaches_the_server_as_decline(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "b"}']), text("Kept."))
    server = await serving(iris_server)
    device = await server.connect()
    await device.send({"type": "message.send", "text": "delete b"})
    asked = (await device.until("elicitation.request"))[-1]
    await answer(device, asked, "decline")
    await device.turn()
    assert told(upstream) == "not deleted (decline)"


async def test_nobody_answers_it_is_declined_at_the_timeout(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "c"}']), text("Timed out."))
    server = await serving(iris_server, wait=0.5)
    device = await server.connect()
    await device.send({"type": "message.send", "text": "delete c"})
    frames = await device.turn()
    resolved = next(f for f in frames if f["type"] == "elicitation.resolved")
    assert (resolved["action"], resolved["by"]) == ("timeout", "timeout")
    assert told(upstream) == "not deleted (decline)"


async def test_a_link_to_open_is_sent_as_its_url(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("mcp_fake_visit", ["{}"]), text("Visited."))
    server = await serving(iris_server)
    device = await server.connect()
    await device.send({"type": "message.send", "text": "print"})
    asked = (await device.until("elicitation.request"))[-1]
    assert asked["url"] == "https://printer.test/in" and asked["schema"] == {}
    await answer(device, asked, "accept")
    await device.turn()
    assert told(upstream) == "visit: accept"


async def test_an_unknown_id_is_told_so(iris_server: StartServer) -> None:
    server = await serving(iris_server)
    device = await server.connect()
    await answer(device, {"elicitation_id": "elic_0123"}, "decline")
    error = (await device.until("error"))[-1]
    assert error["code"] == "elicitation_unknown"

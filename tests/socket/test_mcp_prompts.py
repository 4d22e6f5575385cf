"""An MCP server's prompts as chat commands on the iris socket: ``/prompt`` lists them,
``/prompt <server> <name> key=value`` runs one as the person's message. The fake MCP server
(``tests/fakes/mcp_server.py``, the ``mcp`` SDK) as a stdio child, the scripted model."""

from __future__ import annotations

import pytest

from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import FakeUpstream, text
from tests.socket.conftest import StartServer

pytestmark = pytest.mark.timeout(60)


async def test_prompts_are_listed_and_one_runs_as_the_persons_message(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    server = await iris_server(streaming={"enabled": True}, mcp_servers={"fake": stdio()})
    device = await server.connect()
    await device.send({"type": "message.send", "text": "/prompt"})
    listed = str((await device.until("command"))[-1]["text"])
    assert "fake review topic* Ask for a review of a topic." in listed
    upstream.script(text("Bees are fine."))
    await device.send({"type": "message.send", "text": "/prompt fake review topic=bees"})
    frames = await device.turn()
    assert next(f for f in frames if f["type"] == "message.stop")["final_text"] == "Bees are fine."
    sent = upstream.requests[-1].body["messages"][-1]
    assert sent == {"role": "user", "content": "Please review bees carefully."}


async def test_a_wrong_prompt_is_told_why_and_runs_nothing(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    server = await iris_server(mcp_servers={"fake": stdio()})
    device = await server.connect()
    await device.send({"type": "message.send", "text": "/prompt fake nosuch"})
    error = (await device.until("error"))[-1]
    assert error["code"] == "prompt_failed" and "'nosuch'" in error["message"]
    await device.send({"type": "message.send", "text": "/prompt nobody review"})
    error = (await device.until("error"))[-1]
    assert error["message"] == "no MCP server 'nobody' is configured"
    assert upstream.requests == []

"""An MCP server's request for input across processes: two ``iris serve`` on one real Redis,
the fake MCP server (``tests/fakes/mcp_server.py``, the ``mcp`` SDK's ``ctx.elicit``) a stdio
child of each. The call runs on A; a device on B answers, through the shared store: an invalid
answer is refused on B with the reason (the request stays open), a valid one reaches the server
on A; a second answer to a request already answered is told it is not waiting."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.scale.conftest import RedisServer, serve_on_redis, socket_url
from tests.scale.devices import device
from tests.socket.conftest import TOKEN

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def two(
    tmp_path: Path, redis_server: RedisServer, upstream: FakeUpstream
) -> Iterator[tuple[str, str]]:
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        redis_server,
        platforms={"iris": {"enabled": True, "tokens": [TOKEN]}},
        streaming={"enabled": True},
        tools={"approval": {"mode": "off", "timeout": 30}},
        mcp_servers={"fake": stdio()},
    ) as running:
        yield socket_url(running[0][1]), socket_url(running[1][1])


def respond(asked: dict[str, Any], action: str, **content: Any) -> dict[str, Any]:
    frame: dict[str, Any] = {
        "type": "elicitation.respond",
        "elicitation_id": asked["elicitation_id"],
        "action": action,
    }
    return {**frame, "content": content} if content else frame


def told(upstream: FakeUpstream) -> str:
    return str(upstream.requests[1].body["messages"][-1]["content"])


async def test_an_answer_given_to_the_other_process_reaches_the_server(
    two: tuple[str, str], upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("mcp_fake_paint", ["{}"]), text("Painted."))
    a_url, b_url = two
    on_a, on_b = await device(a_url), await device(b_url)
    await on_a.send({"type": "message.send", "text": "paint"})  # the call runs on A
    asked = (await on_b.until("elicitation.request", within=30))[-1]
    await on_b.send(respond(asked, "accept", color="green", coats=9))
    refused = (await on_b.until("error", within=10))[-1]
    assert (refused["code"], refused["message"]) == (
        "elicitation_invalid",
        "'coats' must be at most 5",
    )
    await on_b.send(respond(asked, "accept", color="green", coats=2))
    frames = await on_a.turn(within=20)
    resolved = [f for f in frames if f["type"] == "elicitation.resolved"]
    assert [(f["action"], f["by"]) for f in resolved] == [("accept", "token")]
    assert told(upstream) == "painted green x2"
    await on_b.send(respond(asked, "decline"))  # over already
    late = (await on_b.until("error", within=10))[-1]
    assert late["code"] == "elicitation_unknown"
    await on_a.close()
    await on_b.close()


async def test_a_decline_given_to_the_other_process_reaches_the_server(
    two: tuple[str, str], upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Kept."))
    a_url, b_url = two
    on_a, on_b = await device(a_url), await device(b_url)
    await on_a.send({"type": "message.send", "text": "delete"})
    asked = (await on_b.until("elicitation.request", within=30))[-1]
    await on_b.send(respond(asked, "decline"))
    await on_a.turn(within=20)
    assert told(upstream) == "not deleted (decline)"
    await on_a.close()
    await on_b.close()

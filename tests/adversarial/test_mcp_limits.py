"""Findings 6 and 7 of the third pass, and the 50 MB result of finding 11, against real MCP
servers written with the ``mcp`` SDK's server API (``tests/fakes/mcp_hostile.py``):

- one server made every model request carry 10 002 tools, 22.3 MB (OpenAI takes 128): now
  at most ``tools.mcp.max_tools`` in all and ``max_tools_per_server`` each, a tool whose
  schema is over ``max_schema_bytes`` is dropped, each drop logged once;
- a server that crashes right after listing its tools restarted every ~2.6 s forever, logging
  its stderr each time: the backoff now starts over only after the server stayed up 60 s, and
  an outage is warned about once;
- a 50 MB result was held whole and parsed at once: now it is read through and dropped past
  ``max_result_bytes``, the call ends as a tool error, the server stays usable.
"""

from __future__ import annotations

import json
import logging
import sys
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from iris.agent import Agent, TurnRequest
from iris.agent.mcp.connection import FIRST_RETRY, STAYED_UP, Backoff
from iris.agent.mcp.stdio import Lines, oversized_id
from iris.events import ToolEnded
from tests.agent.turns import USER, collect
from tests.conftest import MakeConfig
from tests.fakes.mcp_launch import ROOT, http_server
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(90)


def hostile(*argv: str) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_hostile", *argv],
        "env": {"PYTHONPATH": ROOT},
    }


@pytest.fixture
async def started(upstream: FakeUpstream, make_config: MakeConfig) -> AsyncIterator[Any]:
    agents: list[Agent] = []

    async def start(servers: dict[str, Any], **sections: Any) -> Agent:
        agent = Agent(make_config(upstream.base_url, mcp_servers=servers, **sections))
        agents.append(agent)
        await agent.start_tools()
        return agent

    yield start
    for agent in agents:
        await agent.aclose()


def offered(upstream: FakeUpstream) -> list[str]:
    return [t["function"]["name"] for t in upstream.requests[-1].body.get("tools") or []]


def warnings(caplog: pytest.LogCaptureFixture, word: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and word in r.getMessage()
    ]


async def test_a_server_listing_ten_thousand_tools_offers_at_most_the_cap(
    started: Any, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="iris.agent.mcp"):
        agent = await started({"h": hostile("many", "10000")}, tools={"enabled": ["terminal"]})
        upstream.script(text("hi"))
        await collect(agent, TurnRequest(messages=USER))
    names = offered(upstream)
    assert len(names) <= 128 and "mcp_h_echo" in names
    request = json.dumps(upstream.requests[-1].body)
    assert len(request) < 200_000, f"the request carried {len(request):,} characters"
    assert len(warnings(caplog, "max_tools_per_server")) == 1


async def test_two_servers_share_the_cap_in_all(
    started: Any, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    servers = {"a": hostile("many", "100"), "b": hostile("many", "100")}
    with caplog.at_level(logging.WARNING, logger="iris.agent.mcp"):
        agent = await started(servers, tools={"mcp": {"max_tools": 150}})
    names = agent.tools.names()
    assert len(names) == 150
    assert {n.split("_")[1] for n in names if n.startswith("mcp_")} == {"a", "b"}
    assert len(warnings(caplog, "max_tools (150 in all)")) == 1


async def test_a_tool_with_a_huge_schema_is_not_offered_the_others_are(
    started: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="iris.agent.mcp"):
        agent = await started({"h": hostile("schema")})
    assert "mcp_h_echo" in agent.tools.names() and "mcp_h_fat" not in agent.tools.names()
    [said] = warnings(caplog, "max_schema_bytes")
    assert "'fat'" in said


async def test_a_50_mb_result_is_read_through_and_dropped_and_the_server_stays_usable(
    started: Any, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    agent = await started({"h": hostile()})
    upstream.script(
        tool_call("mcp_h_big", [json.dumps({"mb": 50})]),
        text("too big"),
        tool_call("mcp_h_echo", [json.dumps({"text": "still here"})]),
        text("fine"),
    )
    tracemalloc.start()
    try:
        with caplog.at_level(logging.WARNING, logger="iris.agent.mcp"):
            events = await collect(agent, TurnRequest(messages=USER))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    ended = next(e for e in events if isinstance(e, ToolEnded))
    assert not ended.ok
    told = next(m for m in upstream.requests[1].body["messages"] if m["role"] == "tool")
    assert "over the cap" in told["content"] and "dropped" in told["content"]
    assert peak < 20_000_000, f"{peak:,} bytes held at the peak for a 50 MB result"
    assert len(warnings(caplog, "max_result_bytes")) == 1
    events = await collect(agent, TurnRequest(messages=USER))
    assert next(e for e in events if isinstance(e, ToolEnded)).ok


async def test_a_50_mb_result_over_http_is_a_tool_error_and_the_server_stays_usable(
    started: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    with http_server(tmp_path, "tests.fakes.mcp_hostile") as url:
        agent = await started({"h": {"url": url}})
        upstream.script(
            tool_call("mcp_h_big", [json.dumps({"mb": 50})]),
            text("too big"),
            tool_call("mcp_h_echo", [json.dumps({"text": "still here"})]),
            text("fine"),
        )
        events = await collect(agent, TurnRequest(messages=USER))
        assert not next(e for e in events if isinstance(e, ToolEnded)).ok
        told = next(m for m in upstream.requests[1].body["messages"] if m["role"] == "tool")
        assert "over the cap" in told["content"]
        assert agent.mcp is not None
        await agent.mcp.wait_until(lambda: "mcp_h_echo" in agent.tools.names())
        events = await collect(agent, TurnRequest(messages=USER))
        assert next(e for e in events if isinstance(e, ToolEnded)).ok


async def test_a_server_that_crashes_after_listing_backs_off_and_warns_once(
    started: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="iris.agent.mcp.connection"):
        agent = await started({"c": hostile("crash")})
        assert agent.mcp is not None
        connection = agent.mcp.connections["c"]
        await agent.mcp.wait_until(lambda: connection.attempts >= 3)
    # Each session got as far as listing its tools; the backoff doubled all the same.
    assert connection.backoff.delay >= 4 * FIRST_RETRY
    said = warnings(caplog, "MCP server c")
    assert len(said) == 1 and "crashed after listing" in said[0]


def test_the_backoff_starts_over_only_after_the_server_stayed_up() -> None:
    now = [0.0]
    backoff = Backoff(lambda: now[0])
    waits: list[float] = []
    for _ in range(4):  # up for a moment, then down: one outage going on
        backoff.up()
        now[0] += 2.0
        wait, news = backoff.down()
        waits.append(wait)
        assert news == (len(waits) == 1)
        now[0] += wait
    assert waits == [1.0, 2.0, 4.0, 8.0]
    backoff.up()
    now[0] += STAYED_UP
    assert backoff.down() == (FIRST_RETRY, True), "a new outage: retried soon, warned again"


def test_an_oversized_line_is_never_held_whole() -> None:
    lines = Lines(1000)
    head = b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"'
    out = lines.feed(head)
    for _ in range(100):
        out += lines.feed(b"z" * 10_000)
        assert len(lines._buffer) <= 65_536  # pyright: ignore[reportPrivateUsage]
    out += lines.feed(b'"}]}}\n{"jsonrpc":"2.0","id":8,"result":{}}\n')
    assert [size is None for _, size in out] == [False, True]
    assert oversized_id(out[0][0]) == 7 and out[0][1] == len(head) + 1_000_000 + 5
    assert json.loads(out[1][0])["id"] == 8

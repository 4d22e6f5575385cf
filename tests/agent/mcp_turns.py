"""The MCP tests' reading of a turn: what the model was offered and told, a scripted call of
a server's tool, and a wait for the agent's MCP servers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from iris.agent import Agent
from iris.events import Event, ToolEnded
from tests.fakes.upstream import FakeUpstream, tool_call


def offered(upstream: FakeUpstream, n: int) -> list[str]:
    return [t["function"]["name"] for t in upstream.requests[n].body.get("tools") or []]


def tool_result(upstream: FakeUpstream, n: int) -> str:
    """The tool message Iris sent the model in its ``n``-th request."""
    return next(m for m in upstream.requests[n].body["messages"] if m["role"] == "tool")["content"]


def ended(events: list[Event]) -> ToolEnded:
    return next(e for e in events if isinstance(e, ToolEnded))


def call(name: str, args: dict[str, Any]) -> Any:
    return tool_call(name, [json.dumps(args)])


async def until(agent: Agent, ready: Callable[[], bool], within: float = 10.0) -> None:
    assert agent.mcp is not None
    async with asyncio.timeout(within):
        await agent.mcp.wait_until(ready)

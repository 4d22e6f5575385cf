"""``iris chat`` with MCP servers: they start with the chat, ``/tools`` lists what is connected,
and a tool's progress shows while it runs (the fake MCP server as a stdio child)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.repl_session import chat_on_terminal, streaming
from tests.conftest import MakeConfig
from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(60)


async def test_tools_lists_the_servers_and_a_tools_progress_shows(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> None:
    servers = {"fake": stdio(include=["steps"]), "gone": {"command": str(tmp_path / "missing")}}
    config = streaming(make_config, upstream, mcp_servers=servers)
    upstream.script(
        tool_call("mcp_fake_steps", [json.dumps({"n": 3, "seconds": 3})]), text("stepped")
    )
    async with chat_on_terminal(config) as s:
        s.type("/tools\r")
        shown = await s.see("mcp gone: unavailable")
        assert "tools: terminal, read_file, mcp_fake_steps" in shown
        assert "mcp fake: connected, 1 tools: mcp_fake_steps" in shown
        assert "tool activity: all" in shown
        s.type("go\r")
        # The running tool's line shows its latest progress note, live.
        shown = await s.see(lambda t: "mcp_fake_steps" in t and "step 1 of 3" in t)
        assert "stepped" not in shown
        await s.see("stepped")

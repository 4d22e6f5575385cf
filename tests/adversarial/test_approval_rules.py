"""Finding 10 of the third pass: approval globs and tool names crossed MCP server boundaries.

``auto: [mcp_search_*]`` (the docs' own example) also auto-approved the tools of a server named
``search_admin``; server ``a_b``'s tool ``c`` and server ``a``'s tool ``b_c`` were both
``mcp_a_b_c`` and the first listed won. Now server names that could clash are a config error,
an ``auto`` entry belongs to one server (the owner rule of ``tools.enabled``), and two tools of
one server whose names come out the same each get a name of their own.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from iris.agent import Agent, TurnRequest
from iris.agent.approvals import ApprovalPolicy
from iris.agent.mcp.naming import tool_names
from iris.config import config_from_dict
from iris.errors import ConfigError
from tests.agent.turns import USER, collect
from tests.conftest import MakeConfig
from tests.fakes.mcp_launch import ROOT
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(60)


def test_server_names_that_could_share_a_tool_name_are_a_config_error() -> None:
    servers = {"search": {"command": "x"}, "search_admin": {"command": "y"}}
    with pytest.raises(ConfigError) as raised:
        config_from_dict({"mcp_servers": servers})
    said = str(raised.value)
    assert "'search' and 'search_admin' clash" in said and "'search-admin'" in said
    # The rename it suggests is fine, and the docs' glob then approves one server's tools.
    servers = {"search": {"command": "x"}, "search-admin": {"command": "y"}}
    config = config_from_dict(
        {"mcp_servers": servers, "tools": {"approval": {"auto": ["mcp_search_*"]}}}
    )
    policy = ApprovalPolicy.configured(config.tools.approval, config.mcp_servers)
    assert not policy.asks("mcp_search_lookup")
    assert policy.asks("mcp_search-admin_drop_table")


def test_an_auto_entry_of_one_server_never_approves_another_servers_tool() -> None:
    # Even where the names clash (a policy built without the config's check).
    policy = ApprovalPolicy(auto=("mcp_search_*",), servers=("search", "search_admin"))
    assert not policy.asks("mcp_search_lookup")
    assert policy.asks("mcp_search_admin_drop_table")
    # An entry of no one server is the glob it says, over every server.
    everything = ApprovalPolicy(auto=("mcp_*",), servers=("search", "search_admin"))
    assert not everything.asks("mcp_search_admin_drop_table")
    assert everything.asks("terminal")


def test_tools_of_one_server_with_the_same_function_name_each_keep_their_own() -> None:
    names = tool_names("s", ["a.b", "a_b", "c"])
    assert names["c"] == "mcp_s_c"
    assert len(set(names.values())) == 3
    assert names == tool_names("s", ["c", "a_b", "a.b"]), "the order listed decides nothing"
    long = ["x" * 70 + "1", "x" * 70 + "2"]  # the same once cut at 64
    cut = tool_names("s", long)
    assert len(set(cut.values())) == 2 and all(len(n) <= 64 for n in cut.values())


async def test_a_real_server_with_colliding_tool_names_offers_both_and_each_runs_its_own(
    upstream: FakeUpstream, make_config: MakeConfig
) -> None:
    server = {
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_hostile", "collide"],
        "env": {"PYTHONPATH": ROOT},
    }
    config = make_config(
        upstream.base_url, mcp_servers={"h": server}, tools={"approval": {"mode": "off"}}
    )
    agent = Agent(config)
    try:
        await agent.start_tools()
        names = tool_names("h", ["a.b", "a_b"])
        assert {names["a.b"], names["a_b"]} <= set(agent.tools.names())
        for tool, said in (("a.b", "I am a.b"), ("a_b", "I am a_b")):
            upstream.script(tool_call(names[tool], [json.dumps({})]), text("ok"))
            await collect(agent, TurnRequest(messages=USER))
            result: dict[str, Any] = next(
                m for m in upstream.requests[-1].body["messages"] if m["role"] == "tool"
            )
            assert result["content"] == said
    finally:
        await agent.aclose()

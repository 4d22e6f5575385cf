"""The ``mcp_servers:`` contract (errors that name the key, never echo a server's secrets) and
the pure rules of ``iris.agent.mcp``: tool names, which tools are offered, what a result says."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import types

from iris.agent.mcp.naming import chosen, tool_name
from iris.agent.mcp.results import parameters, progress_note, result
from iris.config import config_from_dict
from iris.errors import ConfigError

FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def load(data: dict[str, Any]) -> Any:
    return config_from_dict(data, env={})


def error(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        load(data)
    return caught.value.message


def test_a_stdio_and_an_http_server_with_the_documented_keys() -> None:
    config = load(
        {
            "mcp_servers": {
                "files": {
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
                    "env": {},
                    "include": [],
                    "exclude": [],
                    "timeout": 60,
                    "connect_timeout": 10,
                    "max_duration": 600,
                    "enabled": True,
                },
                "search": {"url": "http://127.0.0.1:9000/mcp", "headers": {}},
            },
            "tools": {"enabled": ["terminal", "mcp_files_*", "mcp_search_lookup"]},
        }
    )
    assert config.mcp_servers["files"].command == "npx"
    assert config.mcp_servers["search"].timeout == 60
    assert config.mcp_servers["search"].max_duration == 600


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"mcp_servers": {"f": {"command": "x", "cmd": "y"}}},
            "unknown config key 'mcp_servers.f.cmd'",
        ),
        ({"mcp_servers": {"f": {}}}, "give either command (stdio) or url"),
        ({"mcp_servers": {"f": {"command": "x", "url": "http://h/mcp"}}}, "give either command"),
        ({"mcp_servers": {"f": {"url": "file:///etc/passwd"}}}, "url must be an http"),
        (
            {"mcp_servers": {"f": {"url": "http://h/mcp", "env": {"A": "b"}}}},
            "args and env are for",
        ),
        ({"mcp_servers": {"a b": {"command": "x"}}}, "config key 'mcp_servers.a b.[key]'"),
        ({"mcp_servers": {"f": {"command": "x", "timeout": 0}}}, "'mcp_servers.f.timeout'"),
        ({"tools": {"enabled": ["shell"]}}, "unknown tool 'shell'"),
        ({"tools": {"enabled": ["mcp_ghost_*"]}}, "'mcp_ghost_*' names no server of mcp_servers"),
        ({"mcp_servers": {"f": {"command": "x", "auth": "oauth"}}}, "auth: oauth is for a url"),
        ({"mcp_servers": {"f": {"url": "http://h/mcp", "auth": "basic"}}}, "mcp_servers.f.auth"),
        (
            {"mcp_servers": {"f": {"url": "http://h/mcp", "client_id": "c"}}},
            "client_id, client_secret_env and callback_port need auth: oauth",
        ),
        (
            {"mcp_servers": {"f": {"url": "http://h", "auth": "oauth", "client_secret_env": "S"}}},
            "client_secret_env is the secret of a client_id",
        ),
        (
            {
                "mcp_servers": {
                    "f": {"url": "http://h", "auth": "oauth", "headers": {"authorization": "x"}}
                }
            },
            "auth: oauth sends its own Authorization header",
        ),
    ],
)
def test_bad_entries_are_errors_that_name_the_key(data: dict[str, Any], message: str) -> None:
    assert message in error(data)


def test_an_error_never_echoes_a_servers_env_or_headers() -> None:
    said = error(
        {"mcp_servers": {"gh": {"command": "x", "headers": {"Authorization": "Bearer s3cr3t"}}}}
    )
    assert "headers are for a url server" in said and "s3cr3t" not in said
    said = error(
        {"mcp_servers": {"gh": {"url": "ftp://x", "headers": {"Authorization": "s3cr3t"}}}}
    )
    assert "s3cr3t" not in said


@given(server=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}", fullmatch=True), tool=st.text())
def test_every_tool_name_is_a_valid_function_name(server: str, tool: str) -> None:
    name = tool_name(server, tool or "t")
    assert FUNCTION_NAME.match(name)
    assert name.startswith(f"mcp_{server}_"[:64])


def test_tools_enabled_entries_belong_to_the_server_with_the_longest_prefix() -> None:
    servers = ["a", "a_b"]
    enabled = ["mcp_a_b_x"]  # a tool of a_b, not the tool b_x of a
    assert chosen("a_b", "x", [], [], enabled, servers)
    assert not chosen("a_b", "y", [], [], enabled, servers)
    assert chosen("a", "b_y", [], [], enabled, servers)  # nothing names a's tools: all of them


def test_include_then_exclude_then_tools_enabled() -> None:
    assert chosen("s", "read", ["re*"], [], [], ["s"])
    assert not chosen("s", "write", ["re*"], [], [], ["s"])
    assert not chosen("s", "remove", ["re*"], ["remove"], [], ["s"])
    assert not chosen("s", "read", [], [], ["mcp_s_list"], ["s"])


def test_a_progress_note_is_the_message_or_progress_over_total() -> None:
    assert progress_note(3, 10, "indexing  ") == "indexing"
    assert progress_note(1, None, "two\nlines " + "x" * 300) == ("two lines " + "x" * 300)[:200]
    assert progress_note(3, 10, None) == "3/10"
    assert progress_note(0.5, None, "") == "0.5"


def test_a_schema_without_a_type_becomes_an_object_schema() -> None:
    assert parameters({})["type"] == "object"
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert parameters(schema) == schema


def test_a_long_result_is_capped_and_an_embedded_resource_is_read() -> None:
    long = types.CallToolResult(content=[types.TextContent(type="text", text="x" * 5000)])
    capped = result(long, 1000)
    assert capped.ok and len(capped.output) < 1100 and "characters cut" in capped.output
    embedded = types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(uri="file:///notes.txt", text="hello"),
    )
    read = result(types.CallToolResult(content=[embedded]), 1000)
    assert read.output == "[resource file:///notes.txt]\nhello"
    empty_error = result(types.CallToolResult(content=[], is_error=True), 1000)
    assert not empty_error.ok and empty_error.output == "error: the tool failed"

"""``iris chat`` asks the person when an MCP server asks (elicitation): the real REPL on a pipe
input and a VT100 output, the real agent, the fake MCP server (``tests/fakes/mcp_server.py``,
the ``mcp`` SDK's ``ctx.elicit``) as a stdio child, the scripted model calling its tools."""

from __future__ import annotations

import pytest

from tests.cli.repl_session import chat_on_terminal, streaming
from tests.conftest import MakeConfig
from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(60)

COLOUR = "Color * (The colour) [1. red  2. green  3. blue] (empty declines) ›"
COATS = "Coats * (How many coats) [a number] (empty declines) ›"
SURE = "Sure * (Really delete it?) [y/n] (empty declines) ›"


def config(make_config: MakeConfig, upstream: FakeUpstream, timeout: float = 30):
    return streaming(
        make_config,
        upstream,
        tools={"approval": {"mode": "off", "timeout": timeout}},
        mcp_servers={"fake": stdio()},
    )


def told(upstream: FakeUpstream) -> str:
    message = upstream.requests[1].body["messages"][-1]
    assert message["role"] == "tool"
    return str(message["content"])


async def test_an_enum_is_a_numbered_choice_and_a_wrong_number_is_asked_again(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("mcp_fake_paint", ["{}"]), text("Painted."))
    async with chat_on_terminal(config(make_config, upstream)) as s:
        s.type("paint\r")
        shown = await s.see(COLOUR, within=30)
        assert "❓ fake asks: Which colour?" in shown
        s.type("2\r")
        await s.see(COATS)
        s.type("9\r")  # past the schema's maximum: asked again, with the reason
        await s.see("✗ must be at most 5 · Coats *")
        s.type("x\r")  # not a number at all
        await s.see("✗ must be a whole number · Coats *")
        s.type("2\r")
        shown = await s.replies(1)
        assert "answered by" in shown and "Painted." in shown
    assert told(upstream) == "painted green x2"


async def test_a_confirmation_is_y_or_n_and_enter_alone_declines(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(
        tool_call("mcp_fake_delete", ['{"path": "a.txt"}']),
        text("Deleted."),
        tool_call("mcp_fake_delete", ['{"path": "b.txt"}']),
        text("Kept."),
    )
    async with chat_on_terminal(config(make_config, upstream)) as s:
        s.type("delete a\r")
        await s.see(SURE, within=30)
        s.type("y\r")
        await s.replies(1)
        s.type("delete b\r")
        await s.see(lambda t: t.count(SURE) >= 2, within=30)
        s.type("\r")
        shown = await s.replies(2)
        assert "declined by" in shown
    assert told(upstream) == "deleted a.txt"
    assert upstream.requests[3].body["messages"][-1]["content"] == "not deleted (decline)"


async def test_nobody_answering_declines(make_config: MakeConfig, upstream: FakeUpstream) -> None:
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Timed out."))
    async with chat_on_terminal(config(make_config, upstream, timeout=1)) as s:
        s.type("delete a\r")
        shown = await s.replies(1)
        assert "declined: nobody answered in time" in shown
    assert told(upstream) == "not deleted (decline)"

"""What ``iris chat`` keeps in its conversation after each way a turn ends (the one rule of
``iris.agent.history``): the next request to the model shows it. A crash ends the process,
and the conversation lives in its memory, so the REPL has no crashed ending to keep."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

from iris.surfaces.cli.repl import Chat, LinePrompt
from iris.surfaces.cli.screen import PlainScreen
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, error, stream_error, text, tool_call

pytestmark = pytest.mark.timeout(20)


async def conversation(make_config: MakeConfig, upstream: FakeUpstream, *lines: str) -> None:
    """Send ``lines`` to a plain-text REPL one by one, until it has read them all."""
    config = make_config(upstream.base_url, streaming={"cli": True}, tools={"enabled": []})
    prompt = LinePrompt(io.StringIO("".join(f"{line}\n" for line in lines)))
    chat = Chat(config, prompt, PlainScreen(io.StringIO(), io.StringIO()))
    assert await asyncio.wait_for(chat.run(), 15) == 0


def sent(upstream: FakeUpstream, n: int = -1) -> list[tuple[str, Any]]:
    return [(m["role"], m["content"]) for m in upstream.requests[n].body["messages"]]


async def test_a_complete_reply_is_kept(make_config: MakeConfig, upstream: FakeUpstream) -> None:
    upstream.script(text("Blue."), text("Yes."))
    await conversation(make_config, upstream, "sky?", "sure?")
    assert sent(upstream) == [("user", "sky?"), ("assistant", "Blue."), ("user", "sure?")]


async def test_a_reply_that_failed_midway_is_kept_as_far_as_it_was_shown(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(stream_error("The sky ", "is bl"), text("blue."))
    await conversation(make_config, upstream, "sky?", "go on")
    assert sent(upstream) == [
        ("user", "sky?"),
        ("assistant", "The sky is bl\n\n[interrupted]"),
        ("user", "go on"),
    ]


async def test_the_question_of_a_turn_that_failed_before_any_text_is_kept(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(error(400, "model not found"), text("recovered"))
    await conversation(make_config, upstream, "one", "two")
    assert sent(upstream) == [("user", "one"), ("user", "two")]


async def test_a_failure_after_a_tool_keeps_the_tool_exchange(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(
        tool_call("terminal", ['{"command": "echo hi"}'], content="Looking."),
        stream_error("It says ", "h"),
        text("hi."),
    )
    config_tools = {"enabled": ["terminal"]}
    config = make_config(upstream.base_url, streaming={"cli": True}, tools=config_tools)
    prompt = LinePrompt(io.StringIO("run it\ngo on\n"))
    chat = Chat(config, prompt, PlainScreen(io.StringIO(), io.StringIO()))
    assert await asyncio.wait_for(chat.run(), 15) == 0
    roles = [role for role, _ in sent(upstream)]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    assert sent(upstream)[1] == ("assistant", "Looking.")
    assert "hi" in sent(upstream)[2][1]
    assert sent(upstream)[3] == ("assistant", "It says h\n\n[interrupted]")

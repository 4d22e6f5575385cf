"""``iris chat`` asks before a tool acts: the real REPL on a pipe input and a VT100 output, the
real agent and ``terminal``, the scripted fake upstream over HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.approvals import asking, call, runs
from tests.cli.repl_session import chat_on_terminal
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(30)

PROMPT = "y once · c this chat · n/Enter deny"


def told(upstream: FakeUpstream) -> str:
    message = upstream.requests[1].body["messages"][-1]
    assert message["role"] == "tool"
    return str(message["content"])


async def test_y_runs_the_command_once_and_the_reply_box_stays_whole(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(call(), text("It ", "ran."))
    async with chat_on_terminal(asking(make_config, upstream, tmp_path)) as s:
        s.type("go\r")
        shown = await s.see(PROMPT)
        # The whole command is shown, and the countdown runs in the status line.
        assert "┊   │ echo ran >> runs.txt" in shown and "s left" in shown
        assert runs(tmp_path) == 0
        s.type("y")
        shown = await s.replies(1)
        assert "allowed once by" in shown
        assert runs(tmp_path) == 1
        # The box of the commentary closed before the tool; the answer has a box of its own.
        tail = shown[shown.rindex("allowed once") :]
        assert tail.index("╭─ Iris") < tail.index("It ran.") < tail.index("╰─")
    assert not told(upstream).startswith("not approved")


async def test_enter_denies_the_command_never_runs_and_the_model_is_told(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(call(), text("Not run."))
    async with chat_on_terminal(asking(make_config, upstream, tmp_path)) as s:
        s.type("go\r")
        await s.see(PROMPT)
        s.type("\r")
        shown = await s.replies(1)
        assert "denied by" in shown and "Not run." in shown
        # Enter answered the prompt: nothing was typed ahead into the next message.
        assert "next:" not in shown[shown.rindex("denied by") :]
    assert runs(tmp_path) == 0
    result = told(upstream)
    assert result.startswith("not approved (denied by") and "work around" in result


async def test_c_allows_the_tool_for_the_rest_of_the_chat_until_new(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(call(), text("one"), call(), text("two"), call(), text("three"))
    async with chat_on_terminal(asking(make_config, upstream, tmp_path)) as s:
        s.type("go\r")
        await s.see(PROMPT)
        s.type("c")
        # "Allow in this chat" is confirmed with a second c, once the prompt says so.
        await s.see(lambda t: s.chat.screen.confirming and s.chat.screen.armed() and "c again" in t)
        s.type("c")
        await s.replies(1)
        s.type("again\r")
        shown = await s.replies(2)
        assert shown.count("waits for your approval") == 1  # the second call ran unasked
        assert runs(tmp_path) == 2
        s.type("/new\r")
        await s.see("new conversation")
        s.type("third\r")
        await s.see(lambda t: t.count("waits for your approval") == 2)
        await s.see(lambda t: PROMPT in t[t.rindex("waits for your approval") :])  # armed
        s.type("n")
        await s.replies(3)
    assert runs(tmp_path) == 2


async def test_nobody_answers_it_times_out_and_never_runs(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(call(), text("Timed out."))
    async with chat_on_terminal(asking(make_config, upstream, tmp_path, timeout=0.5)) as s:
        s.type("go\r")
        shown = await s.replies(1)
        assert "nobody answered in time" in shown
    assert runs(tmp_path) == 0
    assert "silence is not consent" in told(upstream)


async def test_ctrl_c_while_asked_ends_the_turn_and_closes_the_request(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(call(), text("Next."))
    async with chat_on_terminal(asking(make_config, upstream, tmp_path)) as s:
        s.type("go\r")
        await s.see(PROMPT)
        s.type("\x03")
        shown = await s.see("⏹ interrupted")
        assert "the turn was interrupted" in shown
        assert await s.chat.approvals.pending("cli") == []
    assert runs(tmp_path) == 0

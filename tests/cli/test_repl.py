"""``iris chat`` end to end: the real REPL on a pipe input and a VT100 output, the real agent,
the scripted fake upstream over HTTP."""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any

from iris.config import config_from_dict
from iris.surfaces.cli.repl import Chat, LinePrompt, history_path
from iris.surfaces.cli.screen import PlainScreen
from tests.cli.repl_session import chat_on_terminal, streaming
from tests.cli.terminal import strip_ansi
from tests.conftest import MakeConfig
from tests.fakes.upstream import (
    FakeUpstream,
    error,
    gated,
    hold,
    reasoning,
    text,
    tool_call,
)

FOOTER = "fake-model · 10 in · 5 out tokens"


async def test_the_box_opens_with_the_first_token_and_closes_after_the_reply(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(gated("Hel", "lo ", "world", after=1))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("hi\r")
        await s.see("Hel")
        shown = await s.see("╭─ Iris")
        # The fake marks the gate just after writing "Hel", so the terminal may be quicker.
        assert await asyncio.to_thread(upstream.gate_reached.wait, 5.0)
        assert "world" not in shown  # the rest is held back
        assert shown.index("╭─ Iris") < shown.index("Hel")
        upstream.release()
        shown = await s.replies(1)
        assert shown.rindex("Hello world") < shown.rindex("╰─") < shown.rindex(FOOTER)
        assert "┄" not in shown  # a plain answer: a solid bottom edge


async def test_tokens_reach_the_terminal_in_batches(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    tokens = [f"t{i} " for i in range(150)]
    upstream.script(text(*tokens, delay=0.003))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("go\r")
        await s.see("╭─ Iris")
        before = len(s.term.out.writes)
        shown = await s.replies(1)
        assert "t149" in shown
        assert len(upstream.delta_times) == 150
        # Writes that carry reply text (the status line's spinner redraws on its own timer).
        carrying = [w for w in s.term.out.writes[before:] if re.search(r"t\d+", strip_ansi(w))]
        assert len(carrying) < len(tokens) / 4, f"{len(carrying)} writes for {len(tokens)} tokens"


async def test_ctrl_c_stops_the_reply_keeps_its_text_and_closes_the_upstream(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Partial ", "answer"), text("Next."))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("go\r")
        assert await asyncio.to_thread(upstream.gate_reached.wait, 5.0)
        await s.see("answer")  # the unfinished line, drawn in the live area
        s.type("\x03")  # Ctrl-C
        # The agent promises the upstream is closed within 1 s; 2 s leaves room on a busy CI.
        assert await asyncio.to_thread(upstream.disconnected.wait, 2.0)
        shown = await s.see("⏹ interrupted")
        assert shown.rindex("Partial answer") < shown.rindex("╰─") < shown.rindex("⏹ interrupted")
        # The chat goes on, and the partial reply is part of the conversation.
        s.type("and then?\r")
        await s.see("Next.")
        sent = upstream.requests[-1].body["messages"]
        assert {"role": "assistant", "content": "Partial answer\n\n[interrupted]"} in sent
        assert s.task.done() is False


async def test_ctrl_c_during_a_tool_run_stops_the_turn(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("terminal", ['{"command": "sleep 30"}']))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("wait\r")
        await s.see('terminal: "sleep 30"')
        s.type("\x03")
        shown = await s.see("⏹ interrupted")  # long before the 30 s command would end
        assert shown.rindex('┊ ⚡ terminal: "sleep 30"') < shown.rindex("⏹ interrupted")
        assert "✓" not in shown


async def test_what_is_typed_during_a_reply_waits_in_the_next_prompt(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(gated("Rep", "ly.", after=1), text("Sure."))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("first\r")
        assert await asyncio.to_thread(upstream.gate_reached.wait, 5.0)
        s.type("follow upx\x7f")  # a backspace too
        await s.see("next: follow up")
        upstream.release()
        await s.replies(1)
        s.type(" please\r")
        await s.replies(2)
        sent = upstream.requests[-1].body["messages"][-1]
        assert sent == {"role": "user", "content": "follow up please"}


async def test_a_line_finished_during_a_reply_is_sent_after_it(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(gated("Rep", "ly.", after=1), text("Sure."))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("first\r")
        assert await asyncio.to_thread(upstream.gate_reached.wait, 5.0)
        s.type("and then\r")
        await s.see("next: and then ⏎")
        upstream.release()
        shown = await s.replies(2)  # no second Enter needed
        sent = upstream.requests[-1].body["messages"][-1]
        assert sent == {"role": "user", "content": "and then"}
        assert shown.index("Reply.") < shown.index("❯ and then") < shown.index("Sure.")


async def test_ctrl_d_during_a_reply_leaves_once_it_is_done(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(gated("Rep", "ly.", after=1))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("first\r")
        assert await asyncio.to_thread(upstream.gate_reached.wait, 5.0)
        s.type("\x04")
        await s.see("next: ^D")
        upstream.release()
        shown = await s.replies(1)
        assert "Reply." in shown
        assert await s.exit_code() == 0


async def test_streaming_off_prints_the_whole_reply_at_once(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(text("Hello, ", "wide ", "world", delay=0.02))
    async with chat_on_terminal(streaming(make_config, upstream, on=False)) as s:
        s.type("hi\r")
        shown = await s.replies(1)
        assert upstream.requests[-1].stream is False
        first = next(w for w in s.term.out.writes if "Hello" in w)
        assert "Hello, wide world" in first  # one write, the whole reply
        assert shown.index("╭─ Iris") < shown.index("Hello, wide world") < shown.index("╰─")


async def test_stream_command_switches_streaming_for_the_next_reply(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(text("One ", "two"), text("Three ", "four", delay=0.02))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("hi\r")
        await s.replies(1)
        assert upstream.requests[-1].stream is True
        s.type("/stream off\r")
        await s.see("streaming off")
        start = len(s.term.out.writes)
        s.type("again\r")
        await s.replies(2)
        assert upstream.requests[-1].stream is False
        first = next(w for w in s.term.out.writes[start:] if "Three" in w)
        assert "Three four" in first


async def test_model_command_shows_and_changes_the_model(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(text("a"), text("b"))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("/model\r")
        await s.see("model: fake-model")
        s.type("one\r")
        await s.replies(1)
        assert upstream.requests[-1].body["model"] == "fake-model"
        s.type("/model other-model\r")
        await s.see("model: other-model (from the next message)")
        s.type("two\r")
        await s.replies(2)
        assert upstream.requests[-1].body["model"] == "other-model"


async def test_new_command_starts_an_empty_conversation(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(text("first"), text("second"), text("third"))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("one\r")
        await s.replies(1)
        s.type("two\r")
        await s.replies(2)
        assert [m["role"] for m in upstream.requests[-1].body["messages"]] == [
            "user",
            "assistant",
            "user",
        ]
        s.type("/new\r")
        await s.see("new conversation")
        s.type("three\r")
        await s.replies(3)
        assert upstream.requests[-1].body["messages"] == [{"role": "user", "content": "three"}]


async def test_reasoning_command_shows_and_hides_the_reasoning_box(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(reasoning(["pondering"], ["Yes."]), reasoning(["musing"], ["No."]))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("/reasoning on\r")
        await s.see("reasoning shown")
        s.type("q1\r")
        shown = await s.replies(1)
        assert shown.index("╭─ reasoning") < shown.index("pondering") < shown.rindex("Yes.")
        s.type("/reasoning off\r")
        await s.see("reasoning hidden")
        s.type("q2\r")
        shown = await s.replies(2)
        assert "No." in shown and "musing" not in shown


async def test_tools_command_sets_how_much_tool_activity_shows(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    call = ['{"command": "echo hi-from-tool"}']
    upstream.script(
        tool_call("terminal", call, content="Checking."),
        text("done one"),
        tool_call("terminal", call),
        text("done two"),
        tool_call("terminal", call),
        text("done three"),
    )
    line = '┊ ⚡ terminal: "echo hi-from-tool"  ✓'
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("one\r")
        shown = await s.see("done one")
        assert (
            shown.index("Checking.")
            < shown.index("╰┄")
            < shown.index(line)
            < shown.index("done one")
        )
        s.type("/tools off\r")
        await s.see("tool activity: off")
        s.type("two\r")
        shown = await s.see("done two")
        assert shown.count(line) == 1
        s.type("/tools verbose\r")
        await s.see("tool activity: verbose")
        s.type("three\r")
        shown = await s.see("done three")
        assert '┊ ⚡ terminal: {"command": "echo hi-from-tool"}' in shown
        assert "┊   │ hi-from-tool" in shown  # the output shows in verbose mode


async def test_help_lists_the_commands_and_unknown_ones_are_named(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("/help\r")
        shown = await s.see("Ctrl-D quits")
        for usage in ("/new", "/model", "/stream on|off", "/reasoning on|off", "/tools", "/quit"):
            assert usage in shown
        s.type("/frobnicate\r")
        await s.see("unknown command /frobnicate")
    assert upstream.requests == []


async def test_quit_command_ctrl_d_and_ctrl_c_at_an_empty_prompt_leave(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    for keys in ("/quit\r", "\x04", "\x03"):
        async with chat_on_terminal(streaming(make_config, upstream)) as s:
            s.type(keys)
            assert await s.exit_code() == 0


async def test_ctrl_c_with_text_clears_the_line_instead_of_leaving(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(text("fine"))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("never sent")
        await s.see("never sent")
        s.type("\x03")
        s.type("kept\r")
        await s.replies(1)
        assert not s.task.done()
        assert upstream.requests[-1].body["messages"] == [{"role": "user", "content": "kept"}]


async def test_a_message_can_span_lines(make_config: MakeConfig, upstream: FakeUpstream) -> None:
    upstream.script(text("a"), text("b"))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("line one\\\rline two\r")  # a trailing backslash continues the message
        await s.replies(1)
        assert upstream.requests[-1].body["messages"][-1]["content"] == "line one\nline two"
        s.type("/new\r")
        await s.see("new conversation")
        s.type("alpha\x1b\rbeta\r")  # Alt-Enter adds a line
        await s.replies(2)
        assert upstream.requests[-1].body["messages"][-1]["content"] == "alpha\nbeta"


async def test_the_prompt_history_is_kept_on_disk(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(text("ok"))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("remember me\r")
        await s.replies(1)
    assert "+remember me" in history_path().read_text()


async def test_a_failed_reply_says_why_and_the_chat_goes_on(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(error(400, "model not found"), text("recovered"))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type("one\r")
        await s.see("✗ ")
        s.type("two\r")
        await s.see("recovered")


async def test_the_embedded_model_banner_says_how_to_configure_a_real_one(tmp_path: Any) -> None:
    config = config_from_dict({"store": {"path": str(tmp_path / "iris.db")}}, env={})
    assert config.model.provider == "local"
    async with chat_on_terminal(config) as s:
        shown = await s.see("IRIS_MODEL")
        assert "demo model" in shown and "model.base_url" in shown and "OPENAI_BASE_URL" in shown


async def test_without_a_terminal_the_chat_prints_plain_text(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(
        tool_call("terminal", ['{"command": "echo x"}'], content="Looking."),
        text("# Heading\n", "Some **bold** ", "shown."),
    )
    out, info = io.StringIO(), io.StringIO()
    prompt = LinePrompt(io.StringIO("hello\n/model\n/quit\n"))
    chat = Chat(streaming(make_config, upstream), prompt, PlainScreen(out, info))
    assert await asyncio.wait_for(chat.run(), 10) == 0
    # Only replies on stdout; the banner and command results go to stderr.
    assert "/help for commands" in info.getvalue() and "model: fake-model" in info.getvalue()
    printed = out.getvalue()
    assert printed.startswith("Looking.")
    assert "\x1b" not in printed
    assert not any(ch in printed for ch in "╭╰─┄")
    assert "Looking.\n" in printed and "# Heading\nSome **bold** shown.\n" in printed
    assert printed.index("Looking.") < printed.index('⚡ terminal: "echo x"') < printed.index("# H")
    assert printed.endswith("fake-model · 20 in · 10 out tokens\n")


async def test_compact_and_status_in_the_repl(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(
        text("first answer"),
        text("second answer"),
        text("they asked twice"),  # the summary /compact asks for
        text("third answer"),
    )
    config = streaming(make_config, upstream)
    async with chat_on_terminal(config) as s:
        s.type("/status\r")
        await s.see("last reply: none yet")
        s.type("one\r")
        await s.replies(1)
        s.type("two\r")
        await s.replies(2)
        s.type("/status\r")
        await s.see("last reply: 10 in, 5 out")
        s.type("/compact\r")
        await s.see("earlier conversation summarized: 2 messages")
        s.type("three\r")
        await s.replies(3)
    sent = upstream.requests[-1].body["messages"]
    assert sent[0]["role"] == "system" and sent[0]["content"].endswith("they asked twice")
    assert [m["content"] for m in sent[1:]] == ["two", "second answer", "three"]

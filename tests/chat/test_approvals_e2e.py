"""Approvals on the chat platforms, end to end: the real adapters against the fakes' wire.

The agent calls ``terminal`` (asked by default, ``tools.approval``); the chat shows a prompt
with Allow once / Allow in this chat / Deny (a Telegram inline keyboard, Discord components,
Slack Block Kit buttons) carrying the whole command; a press comes back the way each platform
delivers it (a ``callback_query`` over getUpdates, INTERACTION_CREATE on the gateway, a
Socket Mode ``block_actions`` envelope) and is answered the platform's way
(``answerCallbackQuery``, the interaction callback, an ephemeral message).

What a person would notice: the command runs exactly once after an allow and never after a
deny, a timeout or an interrupt; the prompt is edited to say what was decided and by whom, and
its buttons go; a stranger's press changes nothing; of two presses at once one decides.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from iris.formats.visible import CUT
from iris.surfaces.chat.prompts import NOT_ALLOWED, NOT_OPEN
from tests.chat import approval_chats
from tests.chat.approval_chats import (
    COMMAND,
    USERS,
    Chat,
    closed,
    ran,
    script_tool_turn,
    shown,
    the_prompt,
    tool_result,
)
from tests.fakes.upstream import FakeUpstream, text, tool_call

# The chat platforms' fixtures (Telegram, Discord, Slack against their fakes).
chat = approval_chats.chat
approval_timeout = approval_chats.approval_timeout

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]


async def test_allow_once_runs_the_command_once_and_says_who_allowed_it(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)
    assert COMMAND in prompt.text, "the whole command is shown while the buttons are live"
    assert list(prompt.buttons) == ["Allow once", "Allow in this chat", "Deny"]
    assert ran(tmp_path) == 0, "nothing runs before the answer"

    await chat.press(prompt.message_id, prompt.buttons["Allow once"], owner)
    after = await closed(chat, prompt)
    await chat.changed(lambda: any(m.text == "Finished." for m in chat.messages()))
    await chat.surface.idle()

    assert after.text.startswith("✅ Allowed once by ")
    assert COMMAND in after.text
    assert ran(tmp_path) == 1
    assert "done-running" in tool_result(upstream.requests[1])
    assert chat.refusals() == []
    assert chat.unanswered() == 0, "every press was answered (no spinner left)"


async def test_deny_never_runs_and_the_model_is_told(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)
    await chat.press(prompt.message_id, prompt.buttons["Deny"], owner)
    after = await closed(chat, prompt)
    await chat.changed(lambda: any(m.text == "Finished." for m in chat.messages()))
    await chat.surface.idle()

    assert after.text.startswith("❌ Denied by ")
    assert ran(tmp_path) == 0
    told = tool_result(upstream.requests[1])
    assert "not approved" in told and "do not" in told.lower(), told


@pytest.mark.parametrize("approval_timeout", [3.0])
async def test_no_answer_times_out_never_runs_and_the_prompt_says_so(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)
    after = await closed(chat, prompt)
    await chat.changed(lambda: any(m.text == "Finished." for m in chat.messages()))
    await chat.surface.idle()

    assert after.text.startswith("⌛ No answer in time")
    assert ran(tmp_path) == 0
    assert "not approved" in tool_result(upstream.requests[1])


async def test_a_press_by_a_user_not_allowed_changes_nothing(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner, _, stranger = USERS[chat.name]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)

    await chat.press(prompt.message_id, prompt.buttons["Allow once"], stranger)
    await chat.changed(lambda: chat.refusals() == [NOT_ALLOWED])
    assert shown(chat, prompt.message_id) == prompt, "the prompt is as it was, buttons live"
    assert ran(tmp_path) == 0

    await chat.press(prompt.message_id, prompt.buttons["Deny"], owner)
    after = await closed(chat, prompt)
    await chat.surface.idle()
    assert after.text.startswith("❌ Denied by ")
    assert ran(tmp_path) == 0


async def test_two_presses_at_once_make_one_decision(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner, friend, _ = USERS[chat.name]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)

    await asyncio.gather(
        chat.press(prompt.message_id, prompt.buttons["Allow once"], owner),
        chat.press(prompt.message_id, prompt.buttons["Deny"], friend),
    )
    after = await closed(chat, prompt)
    await chat.changed(lambda: len(chat.refusals()) == 1)
    await chat.surface.idle()

    allowed = after.text.startswith("✅ Allowed once by ")
    assert allowed or after.text.startswith("❌ Denied by "), after.text
    assert ran(tmp_path) == (1 if allowed else 0)
    [refusal] = chat.refusals()
    assert chat.unanswered() == 0
    assert refusal.startswith("Already decided: " + ("once" if allowed else "deny"))


async def test_an_interrupt_while_pending_closes_the_request(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    upstream.script(
        tool_call("terminal", [json.dumps({"command": COMMAND})]),
        text("Something else."),
    )
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)

    await chat.say(owner, "never mind, something else")  # a new message interrupts the turn
    after = await closed(chat, prompt)
    await chat.changed(lambda: any(m.text == "Something else." for m in chat.messages()))
    await chat.surface.idle()

    assert after.text.startswith("⏹ Cancelled")
    assert ran(tmp_path) == 0
    assert len(upstream.requests) == 2, "the interrupted turn asked the model nothing more"


async def test_a_command_too_long_for_one_message_is_shown_whole_before_the_buttons(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    # Longer than any platform's prompt: Telegram 4096, Slack's section 3000, Discord 1000.
    words = " ".join(f"w{i}" for i in range(900))  # 4300 characters
    command = f"echo {words} > /dev/null; echo ran >> approved"
    script_tool_turn(upstream, command)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)

    before = [m.text for m in chat.messages() if m.message_id != prompt.message_id]
    assert "message above" in prompt.text or "messages above" in prompt.text
    assert len(before) >= 3, before  # the tool line, then the command in parts
    # The last messages before the prompt are the command's parts, then how it runs: they
    # re-join to it whole (each cut is marked).
    runs_in = f"\n\n(runs in the sandbox: workspace {tmp_path / 'ws'}, no network)"
    joined = ["".join(before[i:]).replace(CUT, "") for i in range(len(before))]
    assert command + runs_in in joined, before
    await chat.press(prompt.message_id, prompt.buttons["Allow once"], owner)
    await closed(chat, prompt)
    await chat.changed(lambda: any(m.text == "Finished." for m in chat.messages()))
    await chat.surface.idle()
    assert ran(tmp_path) == 1


async def test_a_press_after_the_request_ended_is_told_so_and_runs_nothing(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)
    await chat.press(prompt.message_id, prompt.buttons["Deny"], owner)
    await closed(chat, prompt)
    await chat.surface.idle()

    # A press that was on its way when the buttons went (the same button, a second later).
    await chat.press(prompt.message_id, prompt.buttons["Allow once"], owner, stale=True)
    await chat.changed(lambda: chat.refusals() == [NOT_OPEN])
    assert ran(tmp_path) == 0


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_allow_in_this_chat_lets_the_tool_run_unasked_for_the_rest_of_the_conversation(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)
    await chat.press(prompt.message_id, prompt.buttons["Allow in this chat"], owner)
    after = await closed(chat, prompt)
    await chat.changed(lambda: any(m.text == "Finished." for m in chat.messages()))
    await chat.surface.idle()
    assert after.text.startswith("✅ Allowed in this chat by ")

    upstream.script(tool_call("terminal", [json.dumps({"command": COMMAND})]), text("Again."))
    await chat.say(owner, "once more")
    await chat.changed(lambda: any(m.text == "Again." for m in chat.messages()))
    await chat.surface.idle()
    assert ran(tmp_path) == 2
    assert not any(m.buttons for m in chat.messages()), "the second call was not asked"

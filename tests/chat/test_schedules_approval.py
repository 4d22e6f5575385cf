"""A scheduled run whose tool asks for approval, on the Telegram stand-in: it waits for the
person like any turn, and when nobody answers the chat is told the approval timed out (the
prompt says so), the command never runs and the run still ends with its reply."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chat import approval_chats
from tests.chat.approval_chats import (
    USERS,
    Chat,
    closed,
    ran,
    script_tool_turn,
    the_prompt,
    tool_result,
)
from tests.chat.scheduled import scheduler_for
from tests.fakes.upstream import FakeUpstream

chat = approval_chats.chat
approval_timeout = approval_chats.approval_timeout

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
@pytest.mark.parametrize("approval_timeout", [3.0])
async def test_a_scheduled_run_whose_approval_times_out_says_so_in_the_chat(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    await chat.say(owner, "/remind in 1m run it")
    await chat.changed(lambda: any(m.text.endswith(": run it") for m in chat.messages()))

    script_tool_turn(upstream)
    scheduler = scheduler_for(chat.surface, later=61)  # the minute has passed
    (run,) = await scheduler.tick()
    prompt = await the_prompt(chat)
    assert any(m.text == "⏰ run it" for m in chat.messages()), "marked as scheduled"
    assert ran(tmp_path) == 0, "nothing runs before an answer"

    after = await closed(chat, prompt)  # nobody answers
    assert after.text.startswith("⌛ No answer in time")
    assert await run == "delivered"
    await scheduler.stop()
    assert any(m.text == "Finished." for m in chat.messages())
    assert ran(tmp_path) == 0
    assert "not approved" in tool_result(upstream.requests[1])

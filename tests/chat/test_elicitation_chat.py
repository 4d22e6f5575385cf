"""An MCP server asks the person for input (elicitation) on the chat platforms, end to end: the
fake MCP server (``tests/fakes/mcp_server.py``, the ``mcp`` SDK's ``ctx.elicit``) as a stdio
child, the real adapters against the platforms' fakes (``approval_chats``). A yes-or-no and an
enum are buttons; a number is a reply to the question; a wrong answer is asked again; nobody
answering declines."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chat import approval_chats
from tests.chat.approval_chats import USERS, Chat, Shown, closed, shown, tool_result
from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import FakeUpstream, text, tool_call

chat = approval_chats.chat
approval_timeout = approval_chats.approval_timeout

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]


@pytest.fixture
def chat_keys(approval_timeout: float) -> dict[str, Any]:
    return {
        "tools": {"enabled": [], "approval": {"mode": "off", "timeout": approval_timeout}},
        "mcp_servers": {"fake": stdio()},
    }


async def asked(chat: Chat, *labels: str) -> Shown:
    """Wait for the question whose buttons are ``labels``; it."""

    def find() -> Shown | None:
        return next((m for m in chat.messages() if list(m.buttons) == list(labels)), None)

    await chat.changed(lambda: find() is not None)
    found = find()
    assert found is not None
    return found


async def test_a_confirmation_is_buttons_and_yes_reaches_the_server(
    chat: Chat, upstream: FakeUpstream
) -> None:
    owner = USERS[chat.name][0]
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Deleted."))
    await chat.say(owner, "delete a.txt")
    question = await asked(chat, "Yes", "No", "Decline", "Cancel")
    assert "fake asks: Delete a.txt?" in question.text
    assert "Sure * (Really delete it?)" in question.text
    await chat.press(question.message_id, question.buttons["Yes"], owner)
    after = await closed(chat, question)
    assert "✅ Answered by" in after.text
    await chat.changed(lambda: any(m.text == "Deleted." for m in chat.messages()))
    assert tool_result(upstream.requests[1]) == "deleted a.txt"
    assert chat.unanswered() == 0, "every press was answered"


async def test_an_enum_is_buttons_a_number_a_reply_and_a_wrong_one_is_asked_again(
    chat: Chat, upstream: FakeUpstream
) -> None:
    owner = USERS[chat.name][0]
    upstream.script(tool_call("mcp_fake_paint", ["{}"]), text("Painted."))
    await chat.say(owner, "paint it")
    colour = await asked(chat, "red", "green", "blue", "Decline", "Cancel")
    assert "Color * (The colour)" in colour.text
    await chat.press(colour.message_id, colour.buttons["green"], owner)
    coats = await asked(chat, "Decline", "Cancel")
    assert "↪️ green" in shown(chat, colour.message_id).text, "the question says what was picked"
    assert "Coats * (How many coats)" in coats.text and "Reply to this message" in coats.text
    await chat.say(owner, "9")  # past the schema's maximum: asked again, with the reason
    await chat.changed(
        lambda: any("must be at most 5" in m.text and m.buttons for m in chat.messages())
    )
    again = next(m for m in chat.messages() if "must be at most 5" in m.text and m.buttons)
    await chat.say(owner, "2")
    await closed(chat, again)
    await chat.changed(lambda: any(m.text == "Painted." for m in chat.messages()))
    assert tool_result(upstream.requests[1]) == "painted green x2"
    assert len(upstream.requests) == 2, "the replies answered the question, they ran no turn"


async def test_decline_reaches_the_server(chat: Chat, upstream: FakeUpstream) -> None:
    owner = USERS[chat.name][0]
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Kept."))
    await chat.say(owner, "delete a.txt")
    question = await asked(chat, "Yes", "No", "Decline", "Cancel")
    await chat.press(question.message_id, question.buttons["Decline"], owner)
    assert "❌ Declined by" in (await closed(chat, question)).text
    await chat.changed(lambda: any(m.text == "Kept." for m in chat.messages()))
    assert tool_result(upstream.requests[1]) == "not deleted (decline)"


async def test_a_strangers_press_changes_nothing(chat: Chat, upstream: FakeUpstream) -> None:
    owner, _, stranger = USERS[chat.name]
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Deleted."))
    await chat.say(owner, "delete a.txt")
    question = await asked(chat, "Yes", "No", "Decline", "Cancel")
    await chat.press(question.message_id, question.buttons["Yes"], stranger)
    await chat.changed(lambda: bool(chat.refusals()))
    await chat.press(question.message_id, question.buttons["No"], owner)
    await chat.changed(lambda: any(m.text == "Deleted." for m in chat.messages()))
    assert tool_result(upstream.requests[1]) == "kept a.txt"


@pytest.mark.parametrize("approval_timeout", [1.0])
async def test_nobody_answering_declines(chat: Chat, upstream: FakeUpstream) -> None:
    owner = USERS[chat.name][0]
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Timed out."))
    await chat.say(owner, "delete a.txt")
    question = await asked(chat, "Yes", "No", "Decline", "Cancel")
    assert "nobody answered in time" in (await closed(chat, question)).text
    await chat.changed(lambda: any(m.text == "Timed out." for m in chat.messages()))
    assert tool_result(upstream.requests[1]) == "not deleted (decline)"

"""Finding 11 of the third pass, the approval items: a Telegram press was matched by message id
only, and Telegram numbers messages per chat, so an allowed user's press in their own chat
approved another chat's command; "allow in this chat" in a group let every member's later call
run unasked, and the Redis set of allowances never expired.

Now a press counts only on the very message, in its chat; a group's "allow in this chat" holds
for the turns of the person who pressed it (``tools.approval.group_allow: person``, the
default); an allowance lasts ``tools.approval.allow_ttl`` and the Redis set expires with it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from iris.agent.approvals import ApprovalPolicy
from iris.state.approvals import Approvals, MemoryApprovals, RedisApprovals
from iris.state.redis_store import RedisStore
from iris.surfaces.chat.prompts import NOT_OPEN
from tests.chat import approval_chats as e2e
from tests.chat.approval_chats import (
    COMMAND,
    USERS,
    Chat,
    TelegramChat,
    closed,
    ran,
    the_prompt,
)
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.scale.conftest import RedisServer, redis_server  # noqa: F401  (fixture)

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]

chat = e2e.chat
approval_timeout = e2e.approval_timeout
GROUP = -1001234
OWNER, FRIEND, _ = (int(u) for u in USERS["telegram"])


def asked_and_ran(upstream: FakeUpstream, *replies: str) -> None:
    for reply in replies:
        upstream.script(tool_call("terminal", [json.dumps({"command": COMMAND})]), text(reply))


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_a_press_in_another_chat_on_a_message_with_the_same_id_changes_nothing(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    assert isinstance(chat, TelegramChat)
    api = chat.api
    asked_and_ran(upstream, "Finished.")
    await chat.say(str(OWNER), "run it")
    prompt = await the_prompt(chat)
    # The friend's own private chat holds a message of the bot with the same number, and
    # their press there carries the prompt's button data.
    api.messages.setdefault(FRIEND, {})[int(prompt.message_id)] = "an older message"
    api.press(FRIEND, int(prompt.message_id), FRIEND, prompt.buttons["Allow once"], stale=True)
    await chat.changed(lambda: NOT_OPEN in chat.refusals())
    assert shown_buttons(chat, prompt.message_id), "the request still waits"
    assert ran(tmp_path) == 0
    await chat.press(prompt.message_id, prompt.buttons["Deny"], str(OWNER))
    await closed(chat, prompt)
    assert ran(tmp_path) == 0


def shown_buttons(chat: Chat, message_id: str) -> dict[str, str]:
    return next(m.buttons for m in chat.messages() if m.message_id == message_id)


def open_prompts(chat: TelegramChat) -> list[tuple[int, dict[str, str]]]:
    """The group's messages that show approval buttons now."""
    out: list[tuple[int, dict[str, str]]] = []
    for message_id in list(chat.api.messages.get(GROUP, {})):
        rows = chat.api.keyboard(GROUP, message_id)
        buttons = {b["text"]: b["callback_data"] for row in rows for b in row}
        if "Allow once" in buttons:
            out.append((message_id, buttons))
    return out


def said(chat: TelegramChat, reply: str) -> bool:
    return any(reply in shown for shown in chat.api.messages.get(GROUP, {}).values())


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_allow_in_this_chat_in_a_group_holds_for_the_presser_only(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    assert isinstance(chat, TelegramChat)
    api = chat.api
    asked_and_ran(upstream, "reply-one", "reply-two", "reply-three")
    api.user_says(GROUP, OWNER, "run it", chat_type="group")
    await chat.changed(lambda: len(open_prompts(chat)) == 1)
    [(message_id, buttons)] = open_prompts(chat)
    api.press(GROUP, message_id, OWNER, buttons["Allow in this chat"], chat_type="group")
    await chat.changed(lambda: said(chat, "reply-one"))
    assert ran(tmp_path) == 1
    # Another member's call asks again: the owner's allowance is not theirs.
    first = message_id
    api.user_says(GROUP, FRIEND, "run it too", chat_type="group")
    await chat.changed(lambda: [m for m, _ in open_prompts(chat) if m != first] != [])
    [(message_id, buttons)] = [p for p in open_prompts(chat) if p[0] != first]
    api.press(GROUP, message_id, OWNER, buttons["Deny"], chat_type="group")
    await chat.changed(lambda: said(chat, "reply-two"))
    assert ran(tmp_path) == 1
    # The owner's own next call runs unasked.
    api.user_says(GROUP, OWNER, "once more", chat_type="group")
    await chat.changed(lambda: said(chat, "reply-three"))
    assert ran(tmp_path) == 2
    assert not [m for m, _ in open_prompts(chat) if m > message_id], "nothing was asked"


async def allowed(approvals: Approvals, chat_id: str) -> None:
    """Ask for ``terminal`` in ``chat_id`` and answer "allow in this chat"."""
    request = approvals.request(0, "terminal", {"command": "ls"})
    waiting = asyncio.create_task(approvals.wait(chat_id, request))
    # Until the request is open (a poll on a state, not a timing).
    while await approvals.respond(request.approval_id, "chat", "ada") == "unknown":  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    await waiting


async def test_an_allowance_expires_and_the_redis_set_has_an_expiry(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    now = [1_000_000.0]
    memory = MemoryApprovals(ApprovalPolicy(allow_ttl=600), clock=lambda: now[0])
    await allowed(memory, "c")
    assert not await memory.asks("c", "terminal")
    now[0] += 601
    assert await memory.asks("c", "terminal"), "it asks again once the allowance ran out"

    store = RedisStore(redis_server.url)
    try:
        shared = RedisApprovals(ApprovalPolicy(allow_ttl=600), store)
        await allowed(shared, "c")
        assert not await shared.asks("c", "terminal")
        ttl = await store.aio.ttl(store.chat_key("c", "approved"))
        assert 0 < ttl <= 600, "the set of allowances expires"
    finally:
        store.close()


async def test_a_persons_allowance_is_theirs_and_the_chats_is_everyones() -> None:
    approvals = MemoryApprovals(ApprovalPolicy())
    request = approvals.request(0, "terminal", {"command": "ls"})
    waiting = asyncio.create_task(approvals.wait("group", request))
    answer = approvals.respond(request.approval_id, "chat", "ada", person="7")
    await asyncio.sleep(0)  # the wait registers the request before its first await
    assert await answer == "decided"
    assert (await waiting).person == "7"
    assert not await approvals.asks("group", "terminal", person="7")
    assert await approvals.asks("group", "terminal", person="8")
    assert await approvals.asks("group", "terminal")

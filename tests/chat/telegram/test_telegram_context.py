"""Telegram conversations that last: the window, compaction and the chat commands, end to end.

The real python-telegram-bot against the fake Bot API, the real agent against the scripted
upstream with a context limit that answers like OpenAI (400 ``context_length_exceeded``).
"""

from __future__ import annotations

from typing import Any

import pytest

from iris.agent.context import SUMMARY_PREFIX
from iris.surfaces.commands import CHAT_COMMANDS
from tests.chat.harness import running
from tests.chat.telegram.harness import CHAT, OWNER, UNPACED, telegram_config
from tests.conftest import MakeConfig
from tests.fakes.long_chat import LongChat, is_summary_request
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, hold, text

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]

# One whole message per reply, and no second's pace between a chat's messages: the
# conversation, not the edits or their pacing, is under test.
WHOLE: dict[str, Any] = {
    "settings": {"budgets": UNPACED},
    "display": {"platforms": {"telegram": {"streaming": False}}},
}


async def say(api: FakeBotApi, text_: str, chat: int = CHAT) -> str:
    """Send ``text_`` as the owner; the bot's next message in the chat."""
    before = len(api.chat(chat))
    api.user_says(chat, OWNER, text_)
    await api.wait_until(lambda: len(api.chat(chat)) > before, within=20)
    return api.chat(chat)[before]


def model_requests(upstream: FakeUpstream) -> list[list[dict[str, Any]]]:
    return [r.body["messages"] for r in upstream.requests if not is_summary_request(r)]


async def test_a_long_conversation_keeps_answering(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.context_limit = 30_000
    model = LongChat(reply_chars=2_000)
    upstream.default = model.scenario
    config = telegram_config(make_config, upstream, api, model={"context_window": 6_000}, **WHOLE)
    async with running(config) as gateway:
        for n in range(1, 51):
            reply = await say(api, f"question {n}")
            assert reply.startswith(f"reply {n}:"), reply
        await gateway.idle()
    assert upstream.refused == []
    assert model.summaries
    last = model_requests(upstream)[-1]
    assert last[0]["content"] == SUMMARY_PREFIX + model.summaries[-1]
    assert last[-1] == {"role": "user", "content": "question 50"}
    # The summary never reached the chat: every bot message is a reply.
    assert all(message.startswith("reply ") for message in api.chat(CHAT))


async def test_a_providers_400_mid_conversation_is_recovered_once(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    model = LongChat(reply_chars=3_000)
    upstream.default = model.scenario
    config = telegram_config(make_config, upstream, api, **WHOLE)
    async with running(config):
        for n in range(1, 5):
            await say(api, f"question {n}")
        upstream.context_limit = 8_000
        assert (await say(api, "question 5")).startswith("reply 5:")
        assert len(upstream.refused) == 1
        assert (await say(api, "question 6")).startswith("reply 6:")
    assert len(upstream.refused) == 1
    assert model_requests(upstream)[-1][0]["content"].startswith(SUMMARY_PREFIX)


async def test_commands_are_registered_and_answered(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.script(text("first answer"), text("a path, then"), text("fresh"))
    fallback = {
        "provider": "chat_completions",
        "base_url": upstream.base_url,
        "name": "backup-model",
        "api_key": "sk-test",
    }
    config = telegram_config(make_config, upstream, api, model={"fallback": [fallback]}, **WHOLE)
    async with running(config) as gateway:
        assert [c["command"] for c in api.commands] == list(CHAT_COMMANDS)
        help_ = await say(api, "/help")
        assert all(f"/{name}" in help_ for name in CHAT_COMMANDS)
        assert "last reply: none yet" in await say(api, "/status")
        assert await say(api, "remember 42") == "first answer"
        status = await say(api, "/status@iris_bot")  # Telegram's form in groups
        assert "model: fake-model" in status and "last reply: 10 in, 5 out" in status
        assert await say(api, "/reasoning on") == "reasoning shown"
        assert await say(api, "/model") == "model: fake-model (also configured: backup-model)"
        assert "unknown model" in await say(api, "/model gpt-9")
        assert (
            await say(api, "/model backup-model") == "model: backup-model (from the next message)"
        )
        assert await say(api, "/stop") == "nothing to stop"
        assert await say(api, "/compact") == "nothing to compact yet"
        assert await say(api, "/etc/hosts is odd") == "a path, then"  # not a command
        assert "new conversation" in await say(api, "/new")
        assert await say(api, "what number?") == "fresh"
        await gateway.idle()
    # The model saw neither the commands nor, after /new, the old conversation.
    sent = model_requests(upstream)
    assert [m["content"] for m in sent[1] if m["role"] == "user"] == [
        "remember 42",
        "/etc/hosts is odd",
    ]
    assert sent[2] == [{"role": "user", "content": "what number?"}]
    assert upstream.requests[-1].body["model"] == "backup-model"


async def test_stop_interrupts_and_other_commands_do_not(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.script(hold(*(f"word{i} " for i in range(10))))
    config = telegram_config(make_config, upstream, api)  # streaming: the reply grows
    async with running(config) as gateway:
        api.user_says(CHAT, OWNER, "go on")
        await api.wait_until(lambda: any("word9" in m for m in api.chat(CHAT)))
        assert "/stop it first" in await say(api, "/new")  # the reply was not interrupted
        assert await say(api, "/stop") == "stopped"
        await gateway.idle()
    assert api.chat(CHAT)[0] == " ".join(f"word{i}" for i in range(10))  # no cursor left
    assert len(upstream.requests) == 1


async def test_a_stranger_gets_no_command(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    config = telegram_config(make_config, upstream, api, **WHOLE)
    async with running(config) as gateway:
        api.user_says(99, 99, "/status")
        await api.wait_until(lambda: bool(api.chat(99)))
        await gateway.idle()
    assert "private" in api.chat(99)[0] and "model" not in api.chat(99)[0]
    assert upstream.requests == []


async def test_compact_summarizes_now(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    model = LongChat(reply_chars=500)
    upstream.default = model.scenario
    config = telegram_config(make_config, upstream, api, **WHOLE)
    async with running(config) as gateway:
        for n in range(1, 4):
            await say(api, f"question {n}")
        answer = await say(api, "/compact")
        assert answer.startswith("earlier conversation summarized")
        assert (await say(api, "question 4")).startswith("reply 4:")
        await gateway.idle()
    sent = model_requests(upstream)[-1]
    assert sent[0]["content"] == SUMMARY_PREFIX + model.summaries[-1]
    assert {"role": "user", "content": "question 1"} not in sent
    assert sent[-1] == {"role": "user", "content": "question 4"}

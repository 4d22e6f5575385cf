"""Telegram groups and forum topics end to end: who the bot answers, and one session per topic.

The real python-telegram-bot polls ``FakeBotApi``, which serves group messages with their
entities (``mention``, ``bot_command``), replies with the message they quote, and topic
messages with ``message_thread_id`` and the topic's creation as ``reply_to_message``, as
Telegram does.
"""

from __future__ import annotations

from typing import Any

import pytest

from iris.config import Config
from tests.chat.harness import platform_config, running
from tests.conftest import MakeConfig
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, hold, text

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]

OWNER, STRANGER = 7, 666
GROUP = -100555


def config(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi, **groups: Any
) -> Config:
    settings: dict[str, Any] = {
        "token": api.token,
        "base_url": api.base_url,
        "allowed_users": [OWNER],
        "poll_timeout": 1,
        "debounce": 0,
        # A group's 20 a minute would make each of these tests a minute long.
        "budgets": {"group_chat": {"calls": 20, "per": 2.0}},
    }
    if groups:
        settings["groups"] = groups
    display = {"platforms": {"telegram": {"transport": "edit"}}}
    return platform_config(make_config, upstream, "telegram", settings, display=display)


def asked(upstream: FakeUpstream) -> list[list[str]]:
    """What each model request held of the people's messages."""
    return [
        [m["content"] for m in r.body["messages"] if m["role"] == "user"] for r in upstream.requests
    ]


async def test_in_a_group_the_bot_answers_only_what_is_addressed_to_it(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.script(text("First answer"), text("Second answer"))
    async with running(config(make_config, upstream, api)) as surface:
        api.user_says(GROUP, OWNER, "talking among ourselves", chat_type="supergroup")
        api.user_says(GROUP, STRANGER, "me too", chat_type="supergroup")  # no refusal either
        api.user_says(GROUP, OWNER, "/status@other_bot", chat_type="supergroup")
        await api.wait_received()
        await surface.idle()
        assert api.chat(GROUP) == [] and upstream.requests == []

        api.user_says(GROUP, OWNER, "@iris_bot what is up?", chat_type="supergroup")
        await api.wait_until(lambda: api.chat(GROUP) == ["First answer"])
        await surface.idle()
        api.user_says(GROUP, OWNER, "and then?", chat_type="supergroup", reply_to=1)
        await api.wait_until(lambda: api.chat(GROUP)[-1:] == ["Second answer"])
        await surface.idle()
        api.user_says(GROUP, OWNER, "/status@iris_bot", chat_type="supergroup")
        await api.wait_until(lambda: len(api.chat(GROUP)) == 3)
        await surface.idle()
    # The mention is addressing, not content; what was not addressed never reached the model.
    assert asked(upstream) == [["what is up?"], ["what is up?", "and then?"]]
    assert "model" in api.chat(GROUP)[2].lower()  # /status answered, not sent to the model
    assert len(upstream.requests) == 2


async def test_follow_ups_in_a_topic_the_bot_answered_need_no_mention(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.script(text("Topic answer"), text("Follow-up answer"))
    async with running(config(make_config, upstream, api)) as surface:
        api.user_says(GROUP, OWNER, "@iris_bot start", chat_type="supergroup", thread_id=77)
        await api.wait_until(lambda: api.topic(GROUP, 77) == ["Topic answer"])
        await surface.idle()
        api.user_says(GROUP, OWNER, "go on", chat_type="supergroup", thread_id=77)
        await api.wait_until(lambda: api.topic(GROUP, 77)[-1:] == ["Follow-up answer"])
        # Another topic, and the group outside topics, still need a mention.
        api.user_says(GROUP, OWNER, "not for you", chat_type="supergroup", thread_id=78)
        api.user_says(GROUP, OWNER, "nor this", chat_type="supergroup")
        await api.wait_received()
        await surface.idle()
    assert asked(upstream) == [["start"], ["start", "go on"]]
    assert api.topic(GROUP, 78) == [] and api.topic(GROUP, None) == []


async def test_a_topic_the_bot_answered_needs_no_mention_after_a_restart(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    """Which threads the bot answered in is kept in the store (issue 46), not only in the
    process's memory: the follow-up after a restart is answered without a mention, and a topic
    it never answered in still needs one."""
    upstream.script(text("Topic answer"), text("After the restart"))
    settings = config(make_config, upstream, api)
    async with running(settings) as surface:
        api.user_says(GROUP, OWNER, "@iris_bot start", chat_type="supergroup", thread_id=77)
        await api.wait_until(lambda: api.topic(GROUP, 77) == ["Topic answer"])
        await surface.idle()
    async with running(settings) as surface:  # a new process on the same store
        api.user_says(GROUP, OWNER, "not for you", chat_type="supergroup", thread_id=78)
        api.user_says(GROUP, OWNER, "go on", chat_type="supergroup", thread_id=77)
        await api.wait_until(lambda: api.topic(GROUP, 77)[-1:] == ["After the restart"])
        await surface.idle()
    assert asked(upstream) == [["start"], ["start", "go on"]]
    assert api.topic(GROUP, 78) == []


async def test_strict_mention_asks_for_a_mention_in_the_thread_too(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.script(text("Topic answer"), text("Named again"))
    async with running(config(make_config, upstream, api, strict_mention=True)) as surface:
        api.user_says(GROUP, OWNER, "@iris_bot start", chat_type="supergroup", thread_id=77)
        await api.wait_until(lambda: api.topic(GROUP, 77) == ["Topic answer"])
        await surface.idle()
        api.user_says(GROUP, OWNER, "go on", chat_type="supergroup", thread_id=77)
        await api.wait_received()
        await surface.idle()
        assert len(upstream.requests) == 1
        api.user_says(GROUP, OWNER, "go on, @iris_bot", chat_type="supergroup", thread_id=77)
        await api.wait_until(lambda: api.topic(GROUP, 77)[-1:] == ["Named again"])
        await surface.idle()
    assert asked(upstream)[1][-1] == "go on,"


async def test_respond_all_and_free_channels_answer_without_a_mention(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.script(text("To all"), text("Free here"))
    async with running(config(make_config, upstream, api, respond="all")) as surface:
        api.user_says(GROUP, OWNER, "anyone?", chat_type="supergroup")
        await api.wait_until(lambda: api.chat(GROUP) == ["To all"])
        await surface.idle()
    other = GROUP - 1
    async with running(config(make_config, upstream, api, free_channels=[other])) as surface:
        api.user_says(GROUP, OWNER, "not free", chat_type="supergroup")
        api.user_says(other, OWNER, "free talk", chat_type="supergroup")
        await api.wait_until(lambda: api.chat(other) == ["Free here"])
        await surface.idle()
    assert api.chat(GROUP) == ["To all"]
    assert [a[-1] for a in asked(upstream)] == ["anyone?", "free talk"]


async def test_two_topics_are_two_sessions_answered_at_once_each_in_its_own_topic(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.script(hold("Answer ", "one"), hold("Answer ", "two"))
    async with running(config(make_config, upstream, api)) as surface:
        api.user_says(GROUP, OWNER, "@iris_bot first topic", chat_type="supergroup", thread_id=77)
        await api.wait_until(lambda: len(upstream.requests) == 1)
        api.user_says(GROUP, OWNER, "@iris_bot second topic", chat_type="supergroup", thread_id=78)
        # Both turns run at once: the second was asked while the first still streams.
        await api.wait_until(lambda: len(upstream.requests) == 2)
        assert not upstream.finished.is_set()
        upstream.release()
        await api.wait_until(
            lambda: (
                sorted(api.topic(GROUP, 77) + api.topic(GROUP, 78)) == ["Answer one", "Answer two"]
            )
        )
        await surface.idle()
        # Each topic's reply went to its topic: every call of it carried its thread.
        by_topic = {77: api.topic(GROUP, 77), 78: api.topic(GROUP, 78)}
        assert all(len(texts) == 1 for texts in by_topic.values())
        calls = api.sent_in(GROUP, "sendMessage", "editMessageText", "sendChatAction")
        assert calls and all(c.params.get("message_thread_id") in (77, 78) for c in calls)

        # /new in one topic resets that topic only.
        upstream.script(text("Fresh"), text("Still remembered"))
        api.user_says(GROUP, OWNER, "/new@iris_bot", chat_type="supergroup", thread_id=77)
        await api.wait_until(lambda: len(api.topic(GROUP, 77)) == 2)
        await surface.idle()
        api.user_says(GROUP, OWNER, "@iris_bot again", chat_type="supergroup", thread_id=77)
        await api.wait_until(lambda: api.topic(GROUP, 77)[-1:] == ["Fresh"])
        await surface.idle()
        api.user_says(GROUP, OWNER, "@iris_bot again", chat_type="supergroup", thread_id=78)
        await api.wait_until(lambda: api.topic(GROUP, 78)[-1:] == ["Still remembered"])
        await surface.idle()
    first, second, fresh, remembered = asked(upstream)
    # A topic starts empty: neither saw the other's message.
    assert {first[0], second[0]} == {"first topic", "second topic"} and len(first) == 1
    assert len(second) == 1
    assert fresh == ["again"]
    assert remembered == ["second topic", "again"]


async def test_two_topics_answered_at_once_share_the_groups_budget(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    # Telegram limits a group as a whole, its topics together: two replies streaming at once
    # in two topics must stay within the group's budget (the fake counts each chat's calls).
    chunks = [f"word{i} " for i in range(60)]
    reply = "".join(chunks).strip()
    upstream.script(text(*chunks, delay=0.04), text(*chunks, delay=0.04))
    async with FakeBotApi(chat_rate=(2, 1.0)) as api:
        settings = config(make_config, upstream, api).platforms.telegram.model_dump()
        settings["budgets"]["group_chat"] = {"calls": 2, "per": 1.0}
        cfg = platform_config(
            make_config,
            upstream,
            "telegram",
            settings,
            display={"platforms": {"telegram": {"transport": "edit"}}},
        )
        async with running(cfg) as surface:
            api.user_says(GROUP, OWNER, "@iris_bot one", chat_type="supergroup", thread_id=77)
            api.user_says(GROUP, OWNER, "@iris_bot two", chat_type="supergroup", thread_id=78)
            await api.wait_until(
                lambda: api.topic(GROUP, 77) == [reply] and api.topic(GROUP, 78) == [reply]
            )
            await surface.idle()
    edits = [c for c in api.sent_in(GROUP) if c.method == "editMessageText"]
    assert len(edits) >= 2, "both replies grew in place"
    assert api.chat_limited == 0, "the topics together stayed within the group's budget"

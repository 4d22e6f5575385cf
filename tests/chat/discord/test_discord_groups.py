"""Discord channels and threads end to end: who the bot answers, and one session per thread.

MESSAGE_CREATE events come from the fake gateway as Discord sends them (``mentions``,
``referenced_message`` for a reply); the replies go to the fake REST API, a thread being a
channel of its own.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from iris.config import Config
from tests.chat.harness import platform_config, running
from tests.conftest import MakeConfig
from tests.fakes.discord_api import BOT_ID, DiscordAPI
from tests.fakes.discord_gateway import (
    CHANNEL_ID,
    THREAD_ID,
    THREAD_ID_2,
    DiscordGateway,
    message_create,
)
from tests.fakes.upstream import FakeUpstream, hold, text

pytestmark = pytest.mark.timeout(30)

OWNER = "5000000000000001"
_IDS = itertools.count(1300000000000000100)


def config(
    make_config: MakeConfig, upstream: FakeUpstream, api: DiscordAPI, **groups: Any
) -> Config:
    settings: dict[str, Any] = {
        "token": api.token,
        "base_url": api.base_url,
        "allowed_users": [OWNER],
        "debounce": 0,
    }
    if groups:
        settings["groups"] = groups
    return platform_config(make_config, upstream, "discord", settings)


async def says(gateway: DiscordGateway, content: str, **extra: Any) -> None:
    payload = message_create(OWNER, content, message_id=str(next(_IDS)), **extra)
    await gateway.dispatch("MESSAGE_CREATE", payload)


def shown(api: DiscordAPI, channel: str) -> list[str]:
    return [m.content for m in api.messages.values() if m.channel_id == channel]


def asked(upstream: FakeUpstream) -> list[list[str]]:
    return [
        [m["content"] for m in r.body["messages"] if m["role"] == "user"] for r in upstream.requests
    ]


async def test_in_a_channel_the_bot_answers_a_mention_or_a_reply_to_it(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    api: DiscordAPI,
    gateway: DiscordGateway,
) -> None:
    upstream.script(text("First answer"), text("Second answer"))
    async with running(config(make_config, upstream, api)) as surface:
        await says(gateway, "just chatting")
        await says(gateway, f"<@!{BOT_ID}> what is up?")  # the nickname form of a mention
        await api.wait_until(lambda: shown(api, CHANNEL_ID) == ["First answer"])
        await surface.idle()
        [answer] = [m.id for m in api.messages.values()]
        await says(gateway, "and then?", reply_to_bot=answer)
        await api.wait_until(lambda: shown(api, CHANNEL_ID)[-1:] == ["Second answer"])
        await surface.idle()
    # "just chatting" never reached the model, nor its history; the mention is not content.
    assert asked(upstream) == [["what is up?"], ["what is up?", "and then?"]]


async def test_two_threads_are_two_sessions_answered_at_once_each_in_its_thread(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    api: DiscordAPI,
    gateway: DiscordGateway,
) -> None:
    upstream.script(hold("Answer ", "one"), hold("Answer ", "two"))
    async with running(config(make_config, upstream, api)) as surface:
        await says(gateway, f"<@{BOT_ID}> first", channel=THREAD_ID)
        await api.wait_until(lambda: len(upstream.requests) == 1)
        await says(gateway, f"<@{BOT_ID}> second", channel=THREAD_ID_2)
        await api.wait_until(lambda: len(upstream.requests) == 2)
        assert not upstream.finished.is_set()  # both turns run at once
        upstream.release()
        await api.wait_until(
            lambda: (
                sorted(shown(api, THREAD_ID) + shown(api, THREAD_ID_2))
                == ["Answer one", "Answer two"]
            )
        )
        await surface.idle()
        # Every call of each reply (typing included) went to its thread's channel.
        calls = api.channel_calls()
        assert calls and {c.channel_id for c in calls} == {THREAD_ID, THREAD_ID_2}

        # In a thread the bot answered in, follow-ups need no mention; /new resets it alone.
        upstream.script(text("Fresh"), text("Still remembered"))
        await says(gateway, "/new", channel=THREAD_ID)
        await api.wait_until(lambda: len(shown(api, THREAD_ID)) == 2)
        await surface.idle()
        await says(gateway, "again", channel=THREAD_ID)
        await api.wait_until(lambda: shown(api, THREAD_ID)[-1:] == ["Fresh"])
        await surface.idle()
        await says(gateway, "again", channel=THREAD_ID_2)
        await api.wait_until(lambda: shown(api, THREAD_ID_2)[-1:] == ["Still remembered"])
        await surface.idle()
    first, second, fresh, remembered = asked(upstream)
    assert {first[0], second[0]} == {"first", "second"} and len(first) == len(second) == 1
    assert fresh == ["again"]
    assert remembered == ["second", "again"]
    assert shown(api, CHANNEL_ID) == []


async def test_strict_mention_asks_for_a_mention_in_the_thread_too(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    api: DiscordAPI,
    gateway: DiscordGateway,
) -> None:
    upstream.script(text("Answered"), text("Named again"))
    async with running(config(make_config, upstream, api, strict_mention=True)) as surface:
        await says(gateway, f"<@{BOT_ID}> start", channel=THREAD_ID)
        await api.wait_until(lambda: shown(api, THREAD_ID) == ["Answered"])
        await surface.idle()
        await says(gateway, "go on", channel=THREAD_ID)
        await says(gateway, f"go on <@{BOT_ID}>", channel=THREAD_ID)
        await api.wait_until(lambda: shown(api, THREAD_ID)[-1:] == ["Named again"])
        await surface.idle()
    assert asked(upstream) == [["start"], ["start", "go on"]]

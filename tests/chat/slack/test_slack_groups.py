"""Slack channels and threads end to end: who the bot answers, and one session per thread.

Events arrive over Socket Mode from ``SlackAPI``, which names a thread reply's parent author
(``parent_user_id``) as Slack does, and sends ``app_mention`` events like an app subscribed to
them.
"""

from __future__ import annotations

from typing import Any

import pytest

from iris.config import Config
from tests.chat.harness import platform_config, running
from tests.conftest import MakeConfig
from tests.fakes.slack_api import BOT_USER_ID, CHANNEL, SlackAPI, app_mention_event, message_event
from tests.fakes.upstream import FakeUpstream, hold, text

pytestmark = pytest.mark.timeout(30)

OWNER = "U0000042"
MENTION = f"<@{BOT_USER_ID}>"


def config(make_config: MakeConfig, upstream: FakeUpstream, api: SlackAPI, **groups: Any) -> Config:
    settings: dict[str, Any] = {
        "bot_token": api.bot_token,
        "app_token": api.app_token,
        "base_url": api.base_url,
        "allowed_users": [OWNER],
        "debounce": 0,
    }
    if groups:
        settings["groups"] = groups
    edits = {"platforms": {"slack": {"transport": "edit"}}}
    return platform_config(make_config, upstream, "slack", settings, display=edits)


def at(n: int) -> dict[str, str]:
    ts = f"1764453{n:03d}.000100"
    return {"ts": ts, "event_ts": ts}


def asked(upstream: FakeUpstream) -> list[list[str]]:
    return [
        [m["content"] for m in r.body["messages"] if m["role"] == "user"] for r in upstream.requests
    ]


def in_thread(api: SlackAPI, thread_ts: str | None) -> list[str]:
    return [m.text for m in api.messages.values() if m.thread_ts == thread_ts]


async def test_in_a_channel_the_bot_answers_a_mention_once_and_its_threads_follow_ups(
    make_config: MakeConfig, upstream: FakeUpstream, api: SlackAPI
) -> None:
    upstream.script(text("Top answer"), text("Thread answer"))
    async with running(config(make_config, upstream, api)) as surface:
        await api.wait_for_ack(await api.push_event(message_event(OWNER, "chatting", **at(1))))
        await api.wait_for_ack(await api.push_event(message_event("U0000666", "me too", **at(2))))
        # With both subscriptions Slack sends a mention twice: as a message and an app_mention.
        await api.push_event(message_event(OWNER, f"{MENTION} what is up?", **at(3)))
        await api.push_event(app_mention_event(OWNER, f"{MENTION} what is up?", **at(3)))
        await api.wait_until(lambda: in_thread(api, None) == ["Top answer"])
        await surface.idle()
        [(_, bot_ts)] = [key for key, m in api.messages.items() if m.text == "Top answer"]
        # A reply in the thread under the bot's message: its parent is the bot's.
        await api.push_event(message_event(OWNER, "and then?", thread_ts=bot_ts, **at(4)))
        await api.wait_until(lambda: in_thread(api, bot_ts) == ["Thread answer"])
        await surface.idle()
    assert asked(upstream) == [["what is up?"], ["and then?"]]  # a thread: a session of its own
    assert all(m.channel == CHANNEL for m in api.messages.values())


async def test_an_app_mention_alone_is_answered_and_strict_mention_gates_follow_ups(
    make_config: MakeConfig, upstream: FakeUpstream, api: SlackAPI
) -> None:
    upstream.script(text("Mentioned"), text("Named again"))
    async with running(config(make_config, upstream, api, strict_mention=True)) as surface:
        thread = "1764453000.000200"
        start = app_mention_event(OWNER, f"{MENTION} start", thread_ts=thread, **at(1))
        await api.push_event(start)
        await api.wait_until(lambda: in_thread(api, thread) == ["Mentioned"])
        await surface.idle()
        await api.wait_for_ack(
            await api.push_event(message_event(OWNER, "go on", thread_ts=thread, **at(2)))
        )
        await surface.idle()
        named = message_event(OWNER, f"go on {MENTION}", thread_ts=thread, **at(3))
        await api.push_event(named)
        await api.wait_until(lambda: in_thread(api, thread)[-1:] == ["Named again"])
        await surface.idle()
    assert asked(upstream) == [["start"], ["start", "go on"]]


async def test_two_threads_of_a_channel_are_two_sessions_answered_at_once(
    make_config: MakeConfig, upstream: FakeUpstream, api: SlackAPI
) -> None:
    one, two = "1764453000.000200", "1764453000.000300"
    upstream.script(hold("Answer ", "one"), hold("Answer ", "two"))
    async with running(config(make_config, upstream, api)) as surface:
        await api.push_event(message_event(OWNER, f"{MENTION} first", thread_ts=one, **at(1)))
        await api.wait_until(lambda: len(upstream.requests) == 1)
        await api.push_event(message_event(OWNER, f"{MENTION} second", thread_ts=two, **at(2)))
        await api.wait_until(lambda: len(upstream.requests) == 2)
        assert not upstream.finished.is_set()  # both turns run at once
        upstream.release()
        await api.wait_until(
            lambda: (
                sorted(in_thread(api, one) + in_thread(api, two)) == ["Answer one", "Answer two"]
            )
        )
        await surface.idle()
        posts = api.calls_to("chat.postMessage", "chat.update")
        assert all(c.args.get("thread_ts") in (one, two) for c in posts)

        # /new in one thread resets that thread only; a follow-up needs no mention there.
        upstream.script(text("Fresh"), text("Still remembered"))
        await api.push_event(message_event(OWNER, " /new", thread_ts=one, **at(3)))
        await api.wait_until(lambda: len(in_thread(api, one)) == 2)
        await surface.idle()
        await api.push_event(message_event(OWNER, "again", thread_ts=one, **at(4)))
        await api.wait_until(lambda: in_thread(api, one)[-1:] == ["Fresh"])
        await surface.idle()
        await api.push_event(message_event(OWNER, "again", thread_ts=two, **at(5)))
        await api.wait_until(lambda: in_thread(api, two)[-1:] == ["Still remembered"])
        await surface.idle()
    first, second, fresh, remembered = asked(upstream)
    assert {first[0], second[0]} == {"first", "second"} and len(first) == len(second) == 1
    assert fresh == ["again"]
    assert remembered == ["second", "again"]

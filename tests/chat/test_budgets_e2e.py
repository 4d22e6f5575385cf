"""Forty chats replying at once against a platform's bot-wide limits, end to end.

The runner and the real agent stream forty replies at once into the platform fakes, which
enforce the limits the platforms document for the whole bot or workspace (Telegram's 30
messages a second, Slack's ``chat.update`` per workspace, Discord's global 50 requests a
second) and count their 429s. The upstream
holds every reply half-way until each chat shows its first text, so that fairness is checked
while all forty still stream; then every reply finishes.
"""

from __future__ import annotations

from typing import Any

import pytest

from iris.surfaces.chat.admission import REFUSAL
from iris.surfaces.chat.reply import CURSOR
from tests.chat.harness import platform_config, running
from tests.conftest import MakeConfig
from tests.fakes.discord_api import DiscordAPI
from tests.fakes.discord_gateway import DiscordGateway, message_create, point_discord_py_at
from tests.fakes.slack_api import MethodLimit, SlackAPI, message_event
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, text

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]

CHATS = 40
CHUNKS = [f"word{i} " for i in range(24)]
REPLY = "".join(CHUNKS).strip()
# Half the reply, then the stream waits for ``upstream.release()``.
HALF = len(CHUNKS) // 2
# Every turn at once: above the server's default of 32 running turns.
SERVER = {"max_turns": 2 * CHATS}


# These private chats are about edit streaming under the bot-wide limit (drafts would send
# each reply once, at its end): pin the transport.
EDITS = {"platforms": {"telegram": {"transport": "edit"}}}


def _script(upstream: FakeUpstream) -> None:
    # Paced, so that every reply is also previewed after the release, not only finished.
    upstream.script(*(text(*CHUNKS, delay=0.05, gate_after=HALF) for _ in range(CHATS)))


async def test_forty_telegram_chats_stay_under_the_bot_wide_limit(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    users = list(range(1000, 1000 + CHATS))
    chats = [5000 + n for n in range(CHATS)]
    _script(upstream)
    async with FakeBotApi() as api:
        settings: dict[str, Any] = {
            "token": api.token,
            "base_url": api.base_url,
            "allowed_users": users,
            "poll_timeout": 1,
        }
        config = platform_config(
            make_config, upstream, "telegram", settings, server=SERVER, display=EDITS
        )
        async with running(config) as surface:
            for chat, user in zip(chats, users, strict=True):
                api.user_says(chat, user, "tell me something")
            # Every chat sees the start of its reply while all forty are still being written.
            await api.wait_until(lambda: all(api.chat(c) for c in chats), within=30)
            assert all(api.chat(c)[0].endswith(CURSOR) for c in chats)
            upstream.release()
            await api.wait_until(lambda: all(api.chat(c) == [REPLY] for c in chats), within=40)
            await surface.idle()

    assert api.limited == 0, "no 429 from the bot-wide limit"
    assert [c for c in api.calls if c.status == 429] == []
    for chat in chats:
        assert api.chat(chat) == [REPLY], "every reply whole, exactly once"
        assert len(api.sent_in(chat, "sendMessage")) == 1


async def test_typing_and_one_off_messages_stay_under_the_bot_wide_limit_too(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    """Forty replies streaming while every chat also shows typing and gets a command's answer,
    and strangers are refused: the runner's own messages and the typing indicators wait for
    the bot-wide budget like the replies (typing only from what the replies leave: in a crowd
    that keeps the budget busy, hardly ever)."""
    users = list(range(1000, 1000 + CHATS))
    chats = [5000 + n for n in range(CHATS)]
    strangers = [(7000 + n, 3000 + n) for n in range(CHATS // 2)]
    _script(upstream)
    async with FakeBotApi() as api:
        settings: dict[str, Any] = {
            "token": api.token,
            "base_url": api.base_url,
            "allowed_users": users,
            "poll_timeout": 1,
        }
        config = platform_config(
            make_config, upstream, "telegram", settings, server=SERVER, display=EDITS
        )

        def answered(chat: int) -> bool:
            shown = api.chat(chat)
            return len(shown) == 2 and shown.count(REPLY) == 1

        async with running(config) as surface:
            for chat, user in zip(chats, users, strict=True):
                api.user_says(chat, user, "tell me something")
                api.user_says(chat, user, "/help")
            for chat, user in strangers:
                api.user_says(chat, user, "hello?")
            await api.wait_until(lambda: all(api.chat(c) for c in chats), within=30)
            upstream.release()
            await api.wait_until(lambda: all(answered(c) for c in chats), within=40)
            await api.wait_until(lambda: all(len(api.chat(c)) == 1 for c, _ in strangers))
            await surface.idle()

    assert api.limited == 0, "no 429 from the bot-wide limit"
    assert [c for c in api.calls if c.status == 429] == []
    for chat in chats:
        assert answered(chat), "the reply once, and the command's answer"
    for chat, user in strangers:
        assert api.chat(chat) == [REFUSAL.format(user_id=user)]


async def test_a_bot_wide_budget_above_the_limit_meets_429s(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    """The control: the same load with a budget set above Telegram's limit draws 429s,
    and still delivers every reply once (the throttle honours retry_after)."""
    users = list(range(1000, 1000 + CHATS))
    chats = [5000 + n for n in range(CHATS)]
    upstream.script(*(text(*CHUNKS) for _ in range(CHATS)))
    async with FakeBotApi() as api:
        settings: dict[str, Any] = {
            "token": api.token,
            "base_url": api.base_url,
            "allowed_users": users,
            "poll_timeout": 1,
            "budgets": {"bot": {"calls": 1000, "per": 1}},
        }
        config = platform_config(
            make_config, upstream, "telegram", settings, server=SERVER, display=EDITS
        )
        async with running(config) as surface:
            for chat, user in zip(chats, users, strict=True):
                api.user_says(chat, user, "tell me something")
            await api.wait_until(lambda: all(api.chat(c) == [REPLY] for c in chats), within=50)
            await surface.idle()

    assert api.limited > 0
    assert all(api.chat(c) == [REPLY] for c in chats)


async def test_forty_slack_channels_share_chat_update_per_workspace(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    users = [f"U{n:07d}" for n in range(CHATS)]
    channels = [f"C{n:07d}" for n in range(CHATS)]
    _script(upstream)
    async with SlackAPI() as api:
        # Slack's Tier 3 is 50 a minute; the same shape over 5 s keeps the test short.
        api.limits["chat.update"] = MethodLimit(50, 5.0)
        settings: dict[str, Any] = {
            "bot_token": api.bot_token,
            "app_token": api.app_token,
            "base_url": api.base_url,
            "allowed_users": users,
            "budgets": {"update": {"calls": 45, "per": 5}},
        }
        config = platform_config(make_config, upstream, "slack", settings, server=SERVER)

        def shown(channel: str) -> list[str]:
            return [m.text for m in api.messages.values() if m.channel == channel]

        async with running(config) as surface:
            for n, (channel, user) in enumerate(zip(channels, users, strict=True)):
                event = message_event(
                    user, "<@UBOT0001> tell me", channel=channel, ts=f"1764453100.{n:06d}"
                )
                await api.push_event(event)
            await api.wait_until(lambda: all(shown(c) for c in channels))
            assert all(shown(c)[0].endswith(CURSOR) for c in channels)
            upstream.release()
            await api.wait_until(lambda: all(shown(c) == [REPLY] for c in channels))
            await surface.idle()

    assert api.limited == 0, "no 429 from a method's limit"
    assert [c for c in api.calls if c.status == 429] == []
    for channel in channels:
        assert shown(channel) == [REPLY]
        posts = [c for c in api.calls_to("chat.postMessage") if c.args["channel"] == channel]
        assert len(posts) == 1


async def test_forty_slack_dms_stream_on_the_stream_methods_own_budget(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    """Streamed replies draw on each stream method's budget (Tier 4), not chat.update's: with
    chat.update's budget at one call a minute the forty streams still finish at their pace."""
    users = [f"U{n:07d}" for n in range(CHATS)]
    channels = [f"D{n:07d}" for n in range(CHATS)]
    _script(upstream)
    async with SlackAPI() as api:
        # Tier 4 is 100+ a minute per method and Tier 3 50 a minute; the same shape over 5 s
        # keeps the test short.
        for method in ("chat.startStream", "chat.appendStream", "chat.stopStream"):
            api.limits[method] = MethodLimit(100, 5.0)
        api.limits["chat.update"] = MethodLimit(1, 60.0)
        settings: dict[str, Any] = {
            "bot_token": api.bot_token,
            "app_token": api.app_token,
            "base_url": api.base_url,
            "allowed_users": users,
            "budgets": {"update": {"calls": 1, "per": 60}, "stream": {"calls": 90, "per": 5}},
        }
        config = platform_config(make_config, upstream, "slack", settings, server=SERVER)

        def shown(channel: str) -> list[str]:
            return [m.text for m in api.messages.values() if m.channel == channel]

        async with running(config) as surface:
            for n, (channel, user) in enumerate(zip(channels, users, strict=True)):
                ts = f"1764453100.{n:06d}"
                await api.push_event(
                    message_event(user, "tell me", channel=channel, channel_type="im", ts=ts)
                )
            await api.wait_until(lambda: all(shown(c) for c in channels))
            upstream.release()
            await api.wait_until(lambda: all(shown(c) == [REPLY] for c in channels))
            await surface.idle()

    assert api.limited == 0, "no 429 from a method's limit"
    assert [c for c in api.calls if c.status == 429] == []
    assert api.calls_to("chat.update", "chat.postMessage") == [], "every reply streamed"
    for channel in channels:
        assert shown(channel) == [REPLY], "every reply whole, exactly once"
        starts = [c for c in api.calls_to("chat.startStream") if c.args["channel"] == channel]
        assert len(starts) == 1
    assert not any(m.streaming for m in api.messages.values()), "every stream ended"


async def test_forty_discord_channels_stay_under_the_global_limit(
    make_config: MakeConfig, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    users = [str(5_000_000_000_000_000 + n) for n in range(CHATS)]
    channels = [str(6_000_000_000_000_000 + n) for n in range(CHATS)]
    _script(upstream)
    async with DiscordAPI() as api, DiscordGateway(token=api.token) as gateway:
        point_discord_py_at(monkeypatch, api, gateway)
        settings: dict[str, Any] = {
            "token": api.token,
            "base_url": api.base_url,
            "allowed_users": users,
        }
        config = platform_config(make_config, upstream, "discord", settings, server=SERVER)

        def shown(channel: str) -> list[str]:
            return [m.content for m in api.messages.values() if m.channel_id == channel]

        async with running(config) as surface:
            for channel, user in zip(channels, users, strict=True):
                await gateway.dispatch(
                    "MESSAGE_CREATE",
                    message_create(user, "<@4000000000000001> go", channel=channel),
                )
            await api.wait_until(lambda: all(shown(c) for c in channels))
            assert all(shown(c)[0].endswith(CURSOR) for c in channels)
            upstream.release()
            await api.wait_until(lambda: all(shown(c) == [REPLY] for c in channels))
            await surface.idle()

    assert api.limited == 0, "no 429 from the global or a channel's limit"
    assert [c for c in api.calls if c.status == 429] == []
    for channel in channels:
        assert shown(channel) == [REPLY]
        posts = [c for c in api.channel_calls() if c.channel_id == channel and c.method == "POST"]
        assert len([c for c in posts if not c.path.endswith("/typing")]) == 1

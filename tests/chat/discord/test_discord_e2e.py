"""Discord end to end: the runner and the real agent, streaming from a scripted upstream.

A user message arrives through the fake gateway; the reply must grow as one POST plus PATCHes
in the thread, within the channel's budget, survive a 429, and never reach the agent for a
stranger.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from iris.surfaces.chat.reply import CURSOR
from iris.surfaces.chat.runner import ChatSurface
from tests.chat.discord.harness import OWNER, contents
from tests.chat.harness import platform_config, running
from tests.conftest import MakeConfig
from tests.fakes.discord_api import DiscordAPI, Scripted
from tests.fakes.discord_gateway import (
    THREAD_ID,
    DiscordGateway,
    message_create,
)
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(20)

THREAD = THREAD_ID


# A reply that streams for ~2.4 s: long enough for a send and a few edits.
CHUNKS = [f"word{i} " for i in range(60)]
REPLY = "".join(CHUNKS).strip()


@pytest.fixture
async def surface(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    api: DiscordAPI,
    gateway: DiscordGateway,
) -> AsyncIterator[ChatSurface]:
    settings = {"token": api.token, "base_url": api.base_url, "allowed_users": [OWNER]}
    async with running(platform_config(make_config, upstream, "discord", settings)) as surface:
        yield surface


async def test_a_reply_grows_in_place_in_the_thread_within_the_budget(
    surface: ChatSurface, gateway: DiscordGateway, api: DiscordAPI, upstream: FakeUpstream
) -> None:
    upstream.script(text(*CHUNKS, delay=0.04))
    await gateway.dispatch(
        "MESSAGE_CREATE", message_create(OWNER, "<@4000000000000001> tell me", channel=THREAD)
    )
    await api.wait_until(lambda: contents(api) == [REPLY])
    await surface.idle()

    calls = api.channel_calls()
    replies = [c for c in calls if not c.path.endswith("/typing")]
    assert [c.method for c in replies][:1] == ["POST"]
    assert {c.method for c in replies[1:]} == {"PATCH"}
    assert len(replies) >= 3, "the reply grew in place"
    assert all(c.json["content"].endswith(CURSOR) for c in replies[:-1])
    assert replies[-1].json["content"] == REPLY
    assert all(c.path.startswith(f"/channels/{THREAD}/") for c in calls)
    assert all(c.status in (200, 204) for c in calls), "never over the channel's budget"
    assert any(c.path.endswith("/typing") for c in calls), "typing was shown"


async def test_a_429_mid_reply_is_survived_with_retry_after(
    surface: ChatSurface, gateway: DiscordGateway, api: DiscordAPI, upstream: FakeUpstream
) -> None:
    upstream.script(text(*CHUNKS, delay=0.04))
    api.script(Scripted(429, retry_after=1.0, method="PATCH"))
    await gateway.dispatch("MESSAGE_CREATE", message_create(OWNER, "<@4000000000000001> go"))
    await api.wait_until(lambda: contents(api) == [REPLY])
    await surface.idle()

    replies = [c for c in api.channel_calls() if not c.path.endswith("/typing")]
    [limited] = [c for c in replies if c.status == 429]
    after = [c for c in replies if c.at > limited.at]
    assert after and after[0].at >= limited.at + 1.0, "retry_after honoured"
    assert [c.method for c in replies].count("POST") == 1, "never sent twice"
    assert contents(api) == [REPLY]


async def test_a_stranger_is_refused_and_never_reaches_the_agent(
    surface: ChatSurface, gateway: DiscordGateway, api: DiscordAPI, upstream: FakeUpstream
) -> None:
    await gateway.dispatch(
        "MESSAGE_CREATE", message_create("6660000000000000", "<@4000000000000001> run rm -rf /")
    )
    await api.wait_until(lambda: len(api.messages) == 1)
    await surface.idle()

    assert "private" in contents(api)[0]
    assert upstream.requests == []


async def test_text_commands_are_answered_and_never_reach_the_model(
    surface: ChatSurface, gateway: DiscordGateway, api: DiscordAPI, upstream: FakeUpstream
) -> None:
    upstream.script(text("an answer"))
    await gateway.dispatch(
        "MESSAGE_CREATE", message_create(OWNER, "<@4000000000000001> /status", channel=THREAD)
    )
    await api.wait_until(lambda: any("last reply: none yet" in c for c in contents(api)))
    await gateway.dispatch(
        "MESSAGE_CREATE", message_create(OWNER, "<@4000000000000001> hello", channel=THREAD)
    )
    await api.wait_until(lambda: "an answer" in contents(api))
    await gateway.dispatch(
        "MESSAGE_CREATE", message_create(OWNER, "<@4000000000000001> /new", channel=THREAD)
    )
    await api.wait_until(lambda: any("new conversation" in c for c in contents(api)))
    await surface.idle()
    assert [r.body["messages"] for r in upstream.requests] == [
        [{"role": "user", "content": "hello"}]
    ]


async def test_refusals_in_a_channel_with_no_conversation_share_the_channels_budget(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    api: DiscordAPI,
    gateway: DiscordGateway,
) -> None:
    """Two strangers in a channel nobody allowed has spoken in yet, then the owner: the three
    messages of that channel keep its budget (one call per 2 s here), as every call of a chat
    does, instead of each refusal pacing itself alone."""
    settings = {
        "token": api.token,
        "base_url": api.base_url,
        "allowed_users": [OWNER],
        "budgets": {"channel": {"calls": 1, "per": 2}},
    }
    upstream.script(text("an answer"))
    async with running(platform_config(make_config, upstream, "discord", settings)) as surface:
        for stranger in ("6660000000000000", "6660000000000001"):
            await gateway.dispatch(
                "MESSAGE_CREATE", message_create(stranger, "<@4000000000000001> hi")
            )
        await api.wait_until(lambda: len(api.messages) == 2)
        await surface.idle()
        await gateway.dispatch("MESSAGE_CREATE", message_create(OWNER, "<@4000000000000001> hello"))
        await api.wait_until(lambda: "an answer" in contents(api))
        await surface.idle()

    posts = [c for c in api.channel_calls() if c.method == "POST" and "/typing" not in c.path]
    assert len(posts) == 3 and all(c.status == 200 for c in posts)
    gaps = [b.at - a.at for a, b in zip(posts, posts[1:], strict=False)]
    assert all(gap >= 2.0 for gap in gaps), gaps

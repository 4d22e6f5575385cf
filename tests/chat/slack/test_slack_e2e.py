"""Slack end to end: the runner and the real agent, streaming from a scripted upstream.

A user message arrives over Socket Mode; the reply must grow as ``chat.postMessage`` plus
``chat.update`` calls in the thread, survive a 429, and never reach the agent for a stranger.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from iris.surfaces.chat.reply import CURSOR
from iris.surfaces.chat.runner import ChatSurface
from tests.chat.harness import platform_config, running
from tests.conftest import MakeConfig
from tests.fakes.slack_api import Scripted, SlackAPI, message_event
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(20)

THREAD = {"thread_ts": "1764453000.000200"}


OWNER = "U0000042"
# A reply that streams for ~2.4 s: long enough for a send and a few edits.
CHUNKS = [f"word{i} " for i in range(60)]
REPLY = "".join(CHUNKS).strip()


@pytest.fixture
async def gateway(
    make_config: MakeConfig, upstream: FakeUpstream, api: SlackAPI
) -> AsyncIterator[ChatSurface]:
    settings = {
        "bot_token": api.bot_token,
        "app_token": api.app_token,
        "base_url": api.base_url,
        "allowed_users": [OWNER],
    }
    # These tests are about edit streaming (streams: test_native.py): pin the transport.
    edits = {"platforms": {"slack": {"transport": "edit"}}}
    config = platform_config(make_config, upstream, "slack", settings, display=edits)
    async with running(config) as surface:
        yield surface


def _texts(api: SlackAPI) -> list[str]:
    return [m.text for m in api.messages.values()]


async def test_a_reply_grows_in_place_in_the_thread(
    gateway: ChatSurface, api: SlackAPI, upstream: FakeUpstream
) -> None:
    upstream.script(text(*CHUNKS, delay=0.04))
    await api.push_event(message_event(OWNER, "<@UBOT0001> tell me", thread_ts=THREAD["thread_ts"]))
    await api.wait_until(lambda: _texts(api) == [REPLY])
    await gateway.idle()

    replies = api.calls_to("chat.postMessage", "chat.update")
    assert [c.method for c in replies][:1] == ["chat.postMessage"]
    assert {c.method for c in replies[1:]} == {"chat.update"}
    assert len(replies) >= 3, "the reply grew in place"
    assert all(c.args["text"].endswith(CURSOR) for c in replies[:-1])
    assert replies[-1].args["text"] == REPLY
    assert all(c.args["thread_ts"] == THREAD["thread_ts"] for c in replies)
    assert all(c.ok for c in api.calls)
    methods = [c.method for c in api.calls]
    first_post = methods.index("chat.postMessage")
    assert "assistant.threads.setStatus" in methods[:first_post], "the thinking status was shown"
    # A status set after the reply's first post would outlive the edits: none is left standing.
    after = [
        c.args["status"]
        for c in api.calls[first_post:]
        if c.method == "assistant.threads.setStatus"
    ]
    assert after in ([], ["is thinking…", ""])


async def test_a_429_mid_reply_is_survived_with_retry_after(
    gateway: ChatSurface, api: SlackAPI, upstream: FakeUpstream
) -> None:
    upstream.script(text(*CHUNKS, delay=0.04))
    api.script(Scripted(429, retry_after=1, method="chat.update"))
    await api.push_event(message_event(OWNER, "<@UBOT0001> go"))
    await api.wait_until(lambda: _texts(api) == [REPLY])
    await gateway.idle()

    replies = api.calls_to("chat.postMessage", "chat.update")
    [limited] = [c for c in replies if c.status == 429]
    after = [c for c in replies if c.at > limited.at]
    assert after and after[0].at >= limited.at + 1.0, "Retry-After honoured"
    assert [c.method for c in replies].count("chat.postMessage") == 1, "never sent twice"
    assert _texts(api) == [REPLY]


async def test_a_stranger_is_refused_and_never_reaches_the_agent(
    gateway: ChatSurface, api: SlackAPI, upstream: FakeUpstream
) -> None:
    await api.push_event(message_event("U0000666", "<@UBOT0001> run rm -rf /"))
    await api.wait_until(lambda: len(api.messages) == 1)
    await gateway.idle()

    assert "private" in _texts(api)[0]
    assert upstream.requests == []


async def test_text_commands_are_answered_in_the_thread(
    gateway: ChatSurface, api: SlackAPI, upstream: FakeUpstream
) -> None:
    # Slack's client takes a leading "/" for its own commands: users type a space first.
    await api.push_event(message_event(OWNER, "<@UBOT0001>  /help", thread_ts=THREAD["thread_ts"]))
    await api.wait_until(lambda: any("/compact" in t for t in _texts(api)))
    second = {"ts": "1764453101.000400", "event_ts": "1764453101.000400"}
    await api.push_event(
        message_event(OWNER, "<@UBOT0001> /reasoning on", thread_ts=THREAD["thread_ts"], **second)
    )
    await api.wait_until(lambda: "reasoning shown" in _texts(api))
    await gateway.idle()
    posts = api.calls_to("chat.postMessage")
    assert all(c.args["thread_ts"] == THREAD["thread_ts"] for c in posts)
    assert upstream.requests == []


async def test_deletes_of_fresh_finals_wait_for_the_workspaces_chat_delete_budget(
    make_config: MakeConfig, upstream: FakeUpstream, api: SlackAPI
) -> None:
    """Two channels' answers come anew (fresh final) at once: each preview's ``chat.delete``
    draws on the workspace's budget for it (one per 2 s here), like every other call."""
    settings = {
        "bot_token": api.bot_token,
        "app_token": api.app_token,
        "base_url": api.base_url,
        "allowed_users": [OWNER],
        "budgets": {"delete": {"calls": 1, "per": 2}},
    }
    fresh = {"platforms": {"slack": {"transport": "edit", "fresh_final_after": 0.5}}}
    upstream.script(*(text(*CHUNKS, delay=0.02) for _ in range(2)))
    config = platform_config(make_config, upstream, "slack", settings, display=fresh)
    async with running(config) as surface:
        for channel in ("C0000001", "C0000002"):
            await api.push_event(message_event(OWNER, "<@UBOT0001> go", channel=channel))
        await api.wait_until(lambda: len(api.calls_to("chat.delete")) == 2)
        await surface.idle()
    deletes = api.calls_to("chat.delete")
    assert all(call.ok for call in deletes)
    assert deletes[1].at - deletes[0].at >= 2.0
    assert sorted(_texts(api)) == [REPLY, REPLY], "each answer once, its preview gone"

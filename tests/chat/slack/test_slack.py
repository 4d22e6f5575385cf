"""The Slack adapter: slack-sdk's Web API and Socket Mode clients against a fake Slack on 127.0.0.1.

Sends and edits with ``thread_ts`` on every call, escaping, the assistant status as typing,
429s and 5xx surfaced at once without retries, and Socket Mode receiving (ack, filtering,
redelivery). One reply end to end through the runner: ``test_slack_e2e.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from iris.config import SlackConfig
from iris.surfaces.chat.platforms.base import IncomingMessage, PlatformError, PlatformRateLimited
from iris.surfaces.chat.platforms.slack import SlackPlatform, SlackRefused
from tests.fakes.slack_api import BOT_USER_ID, CHANNEL, Scripted, SlackAPI, message_event

pytestmark = pytest.mark.timeout(15)

THREAD = {"thread_ts": "1764453000.000200"}


def _config(api: SlackAPI, **overrides: Any) -> SlackConfig:
    values: dict[str, Any] = {
        "enabled": True,
        "bot_token": api.bot_token,
        "app_token": api.app_token,
        "base_url": api.base_url,
        **overrides,
    }
    return SlackConfig(**values)


@pytest.fixture
async def slack(api: SlackAPI) -> AsyncIterator[SlackPlatform]:
    platform = SlackPlatform(_config(api), request_timeout=1)
    yield platform
    await platform.disconnect()


async def test_send_posts_the_message_and_returns_its_ts(
    api: SlackAPI, slack: SlackPlatform
) -> None:
    ts = await slack.send(CHANNEL, "Hello *there*")

    assert api.messages[(CHANNEL, ts)].text == "Hello *there*"
    [call] = api.calls
    assert call.method == "chat.postMessage"
    assert call.authorization == f"Bearer {api.bot_token}"
    assert "thread_ts" not in call.args


async def test_calls_reuse_one_connection(api: SlackAPI, slack: SlackPlatform) -> None:
    # A new connection (and TLS handshake) per edit would delay every step of a streaming reply.
    ts = await slack.send(CHANNEL, "one")
    for n in range(3):
        await slack.edit_message(CHANNEL, ts, f"one {n}")

    assert len({c.connection for c in api.calls}) == 1


async def test_the_text_shows_as_written_and_pings_no_one(
    api: SlackAPI, slack: SlackPlatform
) -> None:
    ts = await slack.send(CHANNEL, "if a < b && c > d: <!channel>")

    # Slack renders the entities back as "<", "&", ">"; unescaped, <!channel> would ping everyone.
    assert api.messages[(CHANNEL, ts)].text == "if a &lt; b &amp;&amp; c &gt; d: &lt;!channel&gt;"


async def test_edit_updates_the_message_in_place(api: SlackAPI, slack: SlackPlatform) -> None:
    ts = await slack.send(CHANNEL, "The answer is ▌")
    await slack.edit_message(CHANNEL, ts, "The answer is 42.")

    assert api.messages[(CHANNEL, ts)].text == "The answer is 42."
    assert len(api.messages) == 1
    update = api.calls[1]
    assert update.method == "chat.update"
    assert (update.args["channel"], update.args["ts"]) == (CHANNEL, ts)


async def test_every_call_of_a_threaded_reply_names_the_thread(
    api: SlackAPI, slack: SlackPlatform
) -> None:
    await slack.send_typing(CHANNEL, thread=THREAD)
    ts = await slack.send(CHANNEL, "in the thread", thread=THREAD)
    await slack.edit_message(CHANNEL, ts, "still in the thread", thread=THREAD)

    assert [c.method for c in api.calls] == [
        "assistant.threads.setStatus",
        "chat.postMessage",
        "chat.update",
    ]
    assert [c.args["thread_ts"] for c in api.calls] == [THREAD["thread_ts"]] * 3
    assert api.messages[(CHANNEL, ts)].thread_ts == THREAD["thread_ts"]
    assert api.statuses == [
        {"channel_id": CHANNEL, "thread_ts": THREAD["thread_ts"], "status": "is thinking…"}
    ]


async def test_typing_outside_a_thread_sends_nothing(api: SlackAPI, slack: SlackPlatform) -> None:
    await slack.send_typing(CHANNEL)

    assert api.calls == []


async def test_typing_stops_asking_an_app_without_the_assistant_scope(
    api: SlackAPI, slack: SlackPlatform
) -> None:
    api.script(Scripted(error="missing_scope", method="assistant.threads.setStatus"))

    await slack.send_typing(CHANNEL, thread=THREAD)  # refused, but the turn goes on
    await slack.send_typing(CHANNEL, thread=THREAD)

    assert len(api.calls_to("assistant.threads.setStatus")) == 1


async def test_a_429_surfaces_at_once_with_retry_after(api: SlackAPI, slack: SlackPlatform) -> None:
    ts = await slack.send(CHANNEL, "first")
    api.script(Scripted(429, retry_after=7), Scripted(429, retry_after=2))

    with pytest.raises(PlatformRateLimited) as send_limited:
        await slack.send(CHANNEL, "second")
    with pytest.raises(PlatformRateLimited) as edit_limited:
        await slack.edit_message(CHANNEL, ts, "first, edited")

    assert (send_limited.value.retry_after, edit_limited.value.retry_after) == (7.0, 2.0)
    assert [c.status for c in api.calls] == [200, 429, 429]  # no retry
    assert api.messages[(CHANNEL, ts)].text == "first"


async def test_a_server_error_is_not_retried_and_may_have_landed(
    api: SlackAPI, slack: SlackPlatform
) -> None:
    api.script(Scripted(503))

    with pytest.raises(PlatformError) as failed:
        await slack.send(CHANNEL, "unknown fate")

    assert failed.value.maybe_landed
    assert len(api.calls) == 1


async def test_no_answer_in_time_may_have_landed(api: SlackAPI, slack: SlackPlatform) -> None:
    api.script(Scripted(hang=True))

    with pytest.raises(PlatformError) as failed:
        await slack.send(CHANNEL, "lost answer")

    assert failed.value.maybe_landed


async def test_a_refused_edit_did_not_land(api: SlackAPI, slack: SlackPlatform) -> None:
    with pytest.raises(SlackRefused) as refused:
        await slack.edit_message(CHANNEL, "1764450000.000100", "gone")

    assert refused.value.error == "message_not_found"
    assert not refused.value.maybe_landed


# -- receiving over Socket Mode -----------------------------------------------------------------


@pytest.fixture
async def received(slack: SlackPlatform) -> asyncio.Queue[IncomingMessage]:
    queue: asyncio.Queue[IncomingMessage] = asyncio.Queue()
    await slack.connect(queue.put)
    return queue


async def test_connect_opens_socket_mode_with_the_app_token(
    api: SlackAPI, received: asyncio.Queue[IncomingMessage]
) -> None:
    [auth, open_call] = api.calls
    assert (auth.method, auth.authorization) == ("auth.test", f"Bearer {api.bot_token}")
    assert (open_call.method, open_call.authorization) == (
        "apps.connections.open",
        f"Bearer {api.app_token}",
    )


async def test_a_user_message_is_acked_and_reaches_the_runner(
    api: SlackAPI, received: asyncio.Queue[IncomingMessage]
) -> None:
    envelope = await api.push_event(
        message_event("U0000042", f"<@{BOT_USER_ID}> is 1 &lt; 2?", thread_ts="1764453000.000200")
    )

    await api.wait_for_ack(envelope)
    incoming = await received.get()

    assert incoming == IncomingMessage(
        platform="slack",
        chat_id=CHANNEL,
        user_id="U0000042",
        text="is 1 < 2?",
        is_group=True,
        message_id="1764453100.000300",
        thread={"thread_ts": "1764453000.000200"},
        addressed=True,
    )


async def test_only_people_reach_the_runner(
    api: SlackAPI, received: asyncio.Queue[IncomingMessage]
) -> None:
    ignored = [
        message_event(BOT_USER_ID, "my own reply"),
        message_event("U0000043", "a bot", bot_id="B0000009"),
        message_event("U0000042", "edited", subtype="message_changed"),
    ]
    for event in [*ignored, message_event("U0000042", "hello", channel_type="im")]:
        await api.wait_for_ack(await api.push_event(event))

    incoming = await received.get()

    assert (incoming.text, incoming.is_group) == ("hello", False)
    assert received.empty()


async def test_a_redelivered_event_is_handled_once(
    api: SlackAPI, received: asyncio.Queue[IncomingMessage]
) -> None:
    await api.wait_for_ack(await api.push_event(message_event("U0000042", "once")))
    await api.wait_for_ack(await api.push_event(message_event("U0000042", "once"), retry_attempt=1))
    await api.wait_for_ack(
        await api.push_event(message_event("U0000042", "next", ts="1764453200.0"))
    )

    assert (await received.get()).text == "once"
    assert (await received.get()).text == "next"
    assert received.empty()


async def test_a_wrong_app_token_fails_connect(api: SlackAPI) -> None:
    platform = SlackPlatform(_config(api, app_token="xapp-wrong"))

    async def ignore(message: IncomingMessage) -> None: ...

    with pytest.raises(SlackRefused, match="invalid_auth"):
        async with asyncio.timeout(5):  # slack-sdk alone would retry this forever
            await platform.connect(ignore)


async def test_the_thinking_status_is_never_left_behind_by_a_growing_reply(
    api: SlackAPI, slack: SlackPlatform, received: asyncio.Queue[IncomingMessage]
) -> None:
    await slack.send_typing(CHANNEL, thread=THREAD)
    ts = await slack.send(CHANNEL, "the reply ▌", thread=THREAD)
    # Slack cleared the status on the post; one set now would outlive the edits below.
    await slack.send_typing(CHANNEL, thread=THREAD)
    await slack.edit_message(CHANNEL, ts, "the reply", thread=THREAD)
    assert [s["status"] for s in api.statuses] == ["is thinking…"]

    # The next question in the thread shows it again.
    question = message_event(
        "U0000042", "and then?", ts="1764453300.0", thread_ts=THREAD["thread_ts"]
    )
    await api.wait_for_ack(await api.push_event(question))
    await received.get()
    await slack.send_typing(CHANNEL, thread=THREAD)

    assert [s["status"] for s in api.statuses] == ["is thinking…"] * 2


async def test_a_status_that_lands_after_the_reply_is_cleared(
    api: SlackAPI, slack: SlackPlatform
) -> None:
    gate = asyncio.Event()
    api.script(Scripted(method="assistant.threads.setStatus", until=gate))
    typing = asyncio.create_task(slack.send_typing(CHANNEL, thread=THREAD))
    await api.wait_until(lambda: api.held == 1)

    await slack.send(CHANNEL, "the reply", thread=THREAD)
    gate.set()  # Slack applies the status after the post
    await typing

    assert [s["status"] for s in api.statuses] == ["is thinking…", ""]


async def test_a_thread_that_refuses_the_status_is_not_asked_again(
    api: SlackAPI, slack: SlackPlatform
) -> None:
    other = {"thread_ts": "1764453999.000100"}
    api.script(Scripted(error="invalid_thread_ts", method="assistant.threads.setStatus"))

    await slack.send_typing(CHANNEL, thread=THREAD)
    await slack.send_typing(CHANNEL, thread=THREAD)
    await slack.send_typing(CHANNEL, thread=other)

    assert [c.args["thread_ts"] for c in api.calls] == [THREAD["thread_ts"], other["thread_ts"]]


async def test_a_missing_app_token_is_named(api: SlackAPI) -> None:
    platform = SlackPlatform(_config(api, app_token=""))

    async def ignore(message: IncomingMessage) -> None: ...

    with pytest.raises(PlatformError, match="platforms.slack.app_token"):
        await platform.connect(ignore)

    assert api.calls == []


async def test_a_wrong_bot_token_fails_connect_before_socket_mode(api: SlackAPI) -> None:
    platform = SlackPlatform(_config(api, bot_token="xoxb-wrong"))

    async def ignore(message: IncomingMessage) -> None: ...

    with pytest.raises(SlackRefused, match="invalid_auth"):
        await platform.connect(ignore)

    assert [c.method for c in api.calls] == ["auth.test"]

"""The Discord adapter against a fake Discord REST API and gateway on 127.0.0.1.

Sends, edits, deletes and typing as the wire sees them (thread channel, no mentions, 429s,
dry rate-limit buckets and 5xx surfaced at once, never slept on or retried) and receiving
through discord.py's gateway client. One reply end to end through the runner: ``test_discord_e2e.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from iris.config import DiscordConfig
from iris.surfaces.chat.platforms.base import IncomingMessage, PlatformError, PlatformRateLimited
from iris.surfaces.chat.platforms.discord import DiscordPlatform
from tests.fakes.discord_api import BOT_ID, DiscordAPI, Scripted
from tests.fakes.discord_gateway import (
    CHANNEL_ID,
    MESSAGE_CONTENT_INTENT,
    THREAD_ID,
    DiscordGateway,
    message_create,
)

pytestmark = pytest.mark.timeout(15)

CHANNEL = CHANNEL_ID
THREAD = THREAD_ID


@pytest.fixture
async def bot(api: DiscordAPI, gateway: DiscordGateway) -> AsyncIterator[DiscordPlatform]:
    # Depends on the gateway so that it closes after the bot has disconnected.
    platform = DiscordPlatform(
        DiscordConfig(enabled=True, token=api.token, base_url=api.base_url), request_timeout=1.0
    )
    await platform.login()
    yield platform
    await platform.disconnect()


async def test_send_creates_the_message_and_returns_its_id(
    api: DiscordAPI, bot: DiscordPlatform
) -> None:
    message_id = await bot.send(CHANNEL, "Hello **there**")

    assert api.messages[message_id].content == "Hello **there**"
    [call] = api.channel_calls()
    assert (call.method, call.path) == ("POST", f"/channels/{CHANNEL}/messages")
    assert call.authorization == f"Bot {api.token}"


async def test_a_reply_never_pings_anyone(api: DiscordAPI, bot: DiscordPlatform) -> None:
    message_id = await bot.send(CHANNEL, "<@5000000000000001> look")
    await bot.edit_message(CHANNEL, message_id, "<@5000000000000001> look, @everyone")

    assert [c.json["allowed_mentions"] for c in api.channel_calls()] == [{"parse": []}] * 2


async def test_edit_replaces_the_text_in_place(api: DiscordAPI, bot: DiscordPlatform) -> None:
    message_id = await bot.send(CHANNEL, "The answer is ▌")
    await bot.edit_message(CHANNEL, message_id, "The answer is 42.")

    assert api.messages[message_id].content == "The answer is 42."
    assert len(api.messages) == 1
    edit = api.channel_calls()[1]
    assert (edit.method, edit.path) == ("PATCH", f"/channels/{CHANNEL}/messages/{message_id}")
    assert edit.json["content"] == "The answer is 42."


async def test_an_edit_to_the_same_text_succeeds(api: DiscordAPI, bot: DiscordPlatform) -> None:
    message_id = await bot.send(CHANNEL, "same")
    await bot.edit_message(CHANNEL, message_id, "same")

    assert api.messages[message_id].content == "same"


async def test_calls_reuse_one_connection(api: DiscordAPI, bot: DiscordPlatform) -> None:
    message_id = await bot.send(CHANNEL, "one")
    for n in range(3):
        await bot.edit_message(CHANNEL, message_id, f"one {n}")

    assert len({c.connection for c in api.channel_calls()}) == 1


async def test_typing_triggers_the_indicator(api: DiscordAPI, bot: DiscordPlatform) -> None:
    await bot.send_typing(CHANNEL)

    [call] = api.channel_calls()
    assert (call.method, call.path, call.status) == ("POST", f"/channels/{CHANNEL}/typing", 204)


async def test_every_call_of_a_threaded_reply_goes_to_the_thread(
    api: DiscordAPI, bot: DiscordPlatform
) -> None:
    thread = {"thread_id": THREAD}
    await bot.send_typing(CHANNEL, thread=thread)
    message_id = await bot.send(CHANNEL, "in the thread", thread=thread)
    await bot.edit_message(CHANNEL, message_id, "still in the thread", thread=thread)

    assert [(c.method, c.path) for c in api.channel_calls()] == [
        ("POST", f"/channels/{THREAD}/typing"),
        ("POST", f"/channels/{THREAD}/messages"),
        ("PATCH", f"/channels/{THREAD}/messages/{message_id}"),
    ]
    assert api.messages[message_id].channel_id == THREAD


async def test_a_429_surfaces_at_once_with_retry_after(
    api: DiscordAPI, bot: DiscordPlatform
) -> None:
    message_id = await bot.send(CHANNEL, "first")
    api.script(*(Scripted(429, retry_after=t) for t in (3.5, 0.25, 2.0)))

    with pytest.raises(PlatformRateLimited) as send_limited:
        async with asyncio.timeout(1.0):  # discord.py alone would sleep 3.5 s and retry
            await bot.send(CHANNEL, "second")
    with pytest.raises(PlatformRateLimited) as edit_limited:
        await bot.edit_message(CHANNEL, message_id, "first, edited")
    with pytest.raises(PlatformRateLimited) as typing_limited:
        await bot.send_typing(CHANNEL)

    assert send_limited.value.retry_after == 3.5
    assert edit_limited.value.retry_after == 0.25
    assert typing_limited.value.retry_after == 2.0
    assert [c.status for c in api.channel_calls()] == [200, 429, 429, 429]  # no retry
    assert api.messages[message_id].content == "first"
    assert len(api.messages) == 1


async def test_a_dry_bucket_is_refused_at_once_without_a_request(
    api: DiscordAPI, bot: DiscordPlatform
) -> None:
    # The fifth answer says "0 remaining, resets in ~5 s": a sixth request would only draw a
    # 429 (Discord bans clients that collect too many), and discord.py would sleep on it.
    async with asyncio.timeout(2.0):
        for n in range(5):
            await bot.send(CHANNEL, f"message {n}")
        with pytest.raises(PlatformRateLimited) as limited:
            await bot.send(CHANNEL, "one too many")

    assert 4.0 < limited.value.retry_after <= 5.0
    assert [c.status for c in api.channel_calls()] == [200] * 5
    assert len(api.messages) == 5


async def test_a_429_closes_the_bucket_until_retry_after(api: DiscordAPI) -> None:
    now = [100.0]
    platform = DiscordPlatform(
        DiscordConfig(token=api.token, base_url=api.base_url), clock=lambda: now[0]
    )
    await platform.login()
    try:
        message_id = await platform.send(CHANNEL, "first")
        api.script(Scripted(429, retry_after=3.5))
        with pytest.raises(PlatformRateLimited):
            await platform.edit_message(CHANNEL, message_id, "edited")
        now[0] += 3.0
        with pytest.raises(PlatformRateLimited) as early:
            await platform.edit_message(CHANNEL, message_id, "edited too early")
        now[0] += 0.5
        await platform.edit_message(CHANNEL, message_id, "edited in time")
    finally:
        await platform.disconnect()

    assert early.value.retry_after == pytest.approx(0.5)
    assert [c.status for c in api.channel_calls()] == [200, 429, 200]
    assert api.messages[message_id].content == "edited in time"


async def test_a_global_429_holds_every_channel_and_route(api: DiscordAPI) -> None:
    now = [100.0]
    platform = DiscordPlatform(
        DiscordConfig(token=api.token, base_url=api.base_url), clock=lambda: now[0]
    )
    await platform.login()
    try:
        api.script(Scripted(429, retry_after=2.0, everywhere=True))
        with pytest.raises(PlatformRateLimited):
            await platform.send(CHANNEL, "first")
        with pytest.raises(PlatformRateLimited) as held:
            await platform.send(THREAD, "elsewhere")
        # The bot's shared budget holds every chat's throttle, and typing, for as long.
        loop_now = asyncio.get_running_loop().time()
        assert platform.budget.seat("any").ready_at("send", "final", loop_now) >= loop_now + 1.9
        await platform.send_typing(THREAD)  # a courtesy: skipped, not an error
        now[0] += 2.0
        await platform.send(THREAD, "later")
    finally:
        await platform.disconnect()

    assert held.value.retry_after == pytest.approx(2.0)
    assert [(c.channel_id, c.status) for c in api.channel_calls()] == [
        (CHANNEL, 429),
        (THREAD, 200),
    ]


async def test_delete_removes_the_message(api: DiscordAPI, bot: DiscordPlatform) -> None:
    message_id = await bot.send(CHANNEL, "gone soon")
    await bot.delete_message(CHANNEL, message_id)

    assert api.messages == {}
    delete = api.channel_calls()[1]
    assert (delete.method, delete.path) == ("DELETE", f"/channels/{CHANNEL}/messages/{message_id}")


async def test_a_server_error_is_not_retried_and_may_have_landed(
    api: DiscordAPI, bot: DiscordPlatform
) -> None:
    api.script(Scripted(500, deliver=True))

    with pytest.raises(PlatformError) as failed:
        await bot.send(CHANNEL, "posted, but the answer was a 500")

    assert failed.value.maybe_landed
    assert len(api.channel_calls()) == 1  # discord.py would have retried: a duplicate message
    assert [m.content for m in api.messages.values()] == ["posted, but the answer was a 500"]


async def test_no_answer_in_time_may_have_landed(api: DiscordAPI, bot: DiscordPlatform) -> None:
    api.script(Scripted(0, hang=True))

    with pytest.raises(PlatformError) as failed:
        await bot.send(CHANNEL, "lost answer")

    assert failed.value.maybe_landed
    assert not isinstance(failed.value, PlatformRateLimited)


async def test_a_rejected_edit_did_not_land(api: DiscordAPI, bot: DiscordPlatform) -> None:
    with pytest.raises(PlatformError) as failed:
        await bot.edit_message(CHANNEL, "1234", "no such message")

    assert not failed.value.maybe_landed
    assert "404" in str(failed.value)


async def test_a_refused_connection_did_not_land(api: DiscordAPI, bot: DiscordPlatform) -> None:
    await api.__aexit__(None, None, None)
    # The first call may still write into the pooled keep-alive connection (ambiguous); once
    # that is gone, the API refuses the connection: nothing can have been posted.
    with pytest.raises(PlatformError):
        await bot.send(CHANNEL, "nobody listens")
    with pytest.raises(PlatformError) as refused:
        await bot.send(CHANNEL, "nobody listens")

    assert not refused.value.maybe_landed
    assert "cannot connect" in str(refused.value)


async def test_a_wrong_token_fails_login(api: DiscordAPI) -> None:
    platform = DiscordPlatform(DiscordConfig(token="wrong", base_url=api.base_url))

    with pytest.raises(PlatformError, match="token was refused"):
        await platform.login()


async def test_a_missing_token_is_named(api: DiscordAPI) -> None:
    platform = DiscordPlatform(DiscordConfig(base_url=api.base_url))

    with pytest.raises(PlatformError, match="platforms.discord.token"):
        await platform.login()


# -- receiving through a fake gateway: HELLO, IDENTIFY, READY, GUILD_CREATE, MESSAGE_CREATE ------


@pytest.fixture
async def received(
    bot: DiscordPlatform,
) -> asyncio.Queue[IncomingMessage]:
    queue: asyncio.Queue[IncomingMessage] = asyncio.Queue()
    await bot.connect(queue.put)  # after the fixture's login: the session is reused
    return queue


async def test_connect_identifies_with_the_message_content_intent(
    api: DiscordAPI, gateway: DiscordGateway, received: asyncio.Queue[IncomingMessage]
) -> None:
    assert gateway.identify["token"] == api.token
    assert gateway.identify["intents"] & MESSAGE_CONTENT_INTENT


async def test_a_user_message_reaches_the_runner_with_its_author(
    gateway: DiscordGateway, received: asyncio.Queue[IncomingMessage]
) -> None:
    await gateway.dispatch("MESSAGE_CREATE", message_create(BOT_ID, "my own reply", bot=True))
    await gateway.dispatch("MESSAGE_CREATE", message_create("5000000000000009", "a bot", bot=True))
    await gateway.dispatch(
        "MESSAGE_CREATE", message_create("5000000000000001", f"<@{BOT_ID}> hi iris")
    )

    incoming = await received.get()

    assert incoming == IncomingMessage(
        platform="discord",
        chat_id=CHANNEL,
        user_id="5000000000000001",
        text="hi iris",
        user_name="ada",  # the unique username; "Ada" is a display name anyone can take
        is_group=True,
        message_id="1300000000000000001",
        addressed=True,
    )
    assert received.empty()


async def test_a_message_in_a_thread_is_answered_in_the_thread(
    api: DiscordAPI,
    gateway: DiscordGateway,
    bot: DiscordPlatform,
    received: asyncio.Queue[IncomingMessage],
) -> None:
    await gateway.dispatch(
        "MESSAGE_CREATE", message_create("5000000000000001", "q", channel=THREAD)
    )
    incoming = await received.get()

    message_id = await bot.send(incoming.chat_id, "an answer", thread=incoming.thread)

    assert (incoming.chat_id, incoming.thread) == (CHANNEL, {"thread_id": THREAD})
    assert api.messages[message_id].channel_id == THREAD


async def test_a_direct_message_is_not_a_group(
    gateway: DiscordGateway, received: asyncio.Queue[IncomingMessage]
) -> None:
    await gateway.dispatch("MESSAGE_CREATE", message_create("5000000000000001", "psst", dm=True))

    incoming = await received.get()

    assert (incoming.chat_id, incoming.user_id, incoming.is_group) == (
        CHANNEL,
        "5000000000000001",
        False,
    )


async def test_a_missing_message_content_intent_fails_connect_with_the_fix(
    api: DiscordAPI, gateway: DiscordGateway
) -> None:
    gateway.message_content_allowed = False
    platform = DiscordPlatform(DiscordConfig(token=api.token, base_url=api.base_url))

    async def ignore(message: IncomingMessage) -> None: ...

    with pytest.raises(PlatformError, match="Message Content intent"):
        await platform.connect(ignore)


async def test_a_dry_channel_bucket_holds_that_chat_out_of_the_shared_line() -> None:
    async with DiscordAPI(rate=(2, 5.0)) as api:
        platform = DiscordPlatform(DiscordConfig(token=api.token, base_url=api.base_url))
        await platform.login()
        try:
            await platform.send(CHANNEL, "one")
            await platform.send(CHANNEL, "two")  # the answer says: Remaining 0, reset in ~5 s
        finally:
            await platform.disconnect()
    now = asyncio.get_running_loop().time()
    held = platform.budget.seat(CHANNEL)
    other = platform.budget.seat(THREAD)
    assert held.ready_at("send", "final", now) >= now + 4.0
    # Waiting on its own bucket, it does not hold the other channels up.
    assert other.ready_at("send", "preview", now) == pytest.approx(now)
    thread_seat = platform.budget.seat(CHANNEL, {"thread_id": THREAD})
    assert thread_seat.key == THREAD, "a thread is a channel of its own"

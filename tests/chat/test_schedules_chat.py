"""Scheduled runs on a chat platform: a turn of the chat's conversation, streamed as a reply
after a ``⏰`` first message; a run that cannot be delivered is retried, then told in the
chat's next delivery.

The scheduler runs on a clock the test moves (no waiting for the minute to come); the
platform is the Telegram stand-in over HTTP (python-telegram-bot, as in production) or the
recording platform where a send must fail.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from iris.observability import metrics
from iris.surfaces.chat.platforms.base import IncomingMessage, PlatformError
from tests.chat.harness import platform_config, running
from tests.chat.scheduled import scheduler_for
from tests.chat.telegram.harness import CHAT, OWNER, telegram_config
from tests.conftest import MakeConfig
from tests.fakes.recording_platform import RecordingPlatform
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, hold, text
from tests.scale.processes import until_async

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]

CHUNKS = [f"joke{i} " for i in range(80)]  # ~3 s at 0.04 s: several edits at 1 call a second
REPLY = "".join(CHUNKS).strip()


@pytest.fixture
async def api() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi() as fake:
        yield fake


async def test_a_telegram_chat_gets_its_scheduled_reply_streamed(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    async with running(telegram_config(make_config, upstream, api)) as surface:
        api.user_says(CHAT, OWNER, "/remind in 20m tell me a joke")
        await api.wait_until(lambda: any("tell me a joke" in m for m in api.chat(CHAT)))
        (answer,) = api.chat(CHAT)
        assert answer.startswith("⏰ ") and answer.endswith(": tell me a joke")
        assert not upstream.requests  # a command never reaches the model

        upstream.script(text(*CHUNKS, delay=0.04))
        scheduler = scheduler_for(surface, later=20 * 60 + 1)
        (run,) = await scheduler.tick()
        assert await run == "delivered"
        await scheduler.stop()

        assert api.chat(CHAT) == [answer, "⏰ tell me a joke", REPLY]
        reply_id = max(api.messages[CHAT])
        edits = [
            c for c in api.sent_in(CHAT, "editMessageText") if c.params["message_id"] == reply_id
        ]
        assert edits, "the reply grew in place, like any reply"
        assert upstream.requests[-1].body["messages"][-1]["content"] == "tell me a joke"
        # The run is done: nothing is due any more, and the chat's list is empty.
        assert await scheduler_for(surface, later=3600).tick() == []
        api.user_says(CHAT, OWNER, "/schedules")
        await api.wait_until(lambda: "no schedules" in api.chat(CHAT)[-1])


async def test_an_undelivered_run_is_retried_then_told_in_the_next_delivery(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    was = metrics.enabled()
    metrics.enable(True)
    try:
        await _undelivered(make_config, upstream)
    finally:
        metrics.enable(was)


async def _undelivered(make_config: MakeConfig, upstream: FakeUpstream) -> None:
    platform = RecordingPlatform()
    config = platform_config(make_config, upstream, "telegram", {"allowed_users": [7]})
    async with running(config, [platform]) as surface:
        surface.retry_delays = (0.0, 0.0)
        await platform.deliver(_message("/every day 08:00 summarise my inbox"))
        await platform.wait_for(lambda: len(platform.messages) == 1)
        schedule_id = platform.chat()[0].split(":")[0].removeprefix("🔁 ")

        gone = PlatformError("Forbidden: bot was blocked by the user")
        platform.script = [gone, gone, gone]
        before = _counted("undelivered")
        scheduler = scheduler_for(surface, later=25 * 3600)
        (run,) = await scheduler.tick()
        assert await run == "undelivered"
        await scheduler.stop()
        assert [c.ok for c in platform.calls if c.kind == "send"][-3:] == [False] * 3
        assert _counted("undelivered") == before + 1
        assert not upstream.requests  # no model call for a run nobody could be shown

        upstream.script(text("hello"))
        await platform.deliver(_message("hi"))
        await platform.wait_for(lambda: platform.chat()[-1:] == ["hello"])
        note = platform.chat()[-2]
        assert f"scheduled run {schedule_id}" in note and "bot was blocked" in note


def _message(words: str) -> IncomingMessage:
    return IncomingMessage(platform="telegram", chat_id="42", user_id="7", text=words)


def _counted(outcome: str) -> float:
    found = metrics.REGISTRY.get_sample_value("iris_schedule_runs_total", {"outcome": outcome})
    return found or 0.0


async def test_a_scheduled_run_waits_for_a_turn_slot_like_any_message(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    """``server.max_turns`` bounds every turn: a run that comes due while another chat's turn
    has the only slot waits in the platform's line and starts its model call after that turn
    ended, not beside it."""
    was = metrics.enabled()
    metrics.enable(True)
    try:
        await _waits_for_a_slot(make_config, upstream)
    finally:
        metrics.enable(was)


async def _waits_for_a_slot(make_config: MakeConfig, upstream: FakeUpstream) -> None:
    platform = RecordingPlatform()
    config = platform_config(
        make_config, upstream, "telegram", {"allowed_users": [7, 8]}, server={"max_turns": 1}
    )
    async with running(config, [platform]) as surface:
        await platform.deliver(_message("/remind in 20m stretch"))
        await platform.wait_for(lambda: len(platform.messages) == 1)
        upstream.script(hold("working"), text("stretch now"))
        other = IncomingMessage(platform="telegram", chat_id="43", user_id="8", text="hi")
        await platform.deliver(other)  # another chat's turn takes the only slot
        assert await asyncio.to_thread(upstream.gate_reached.wait, 10)

        waited = _waited()
        scheduler = scheduler_for(surface, later=20 * 60 + 1)
        (run,) = await scheduler.tick()

        async def joined_the_line() -> bool:
            return _waited() > waited

        await until_async(joined_the_line, "the run to wait in the line")
        released_at = time.monotonic()
        upstream.release()
        assert await run == "delivered"
        await scheduler.stop()
        first, second = upstream.requests
        assert first.body["messages"][-1]["content"] == "hi"
        assert second.at > released_at, "the run's turn started beside the running one"
        assert platform.chat()[-3:] == ["⏰ stretch", "working", "stretch now"]


def _waited() -> float:
    found = metrics.REGISTRY.get_sample_value(
        "iris_chat_messages_waited_total", {"platform": "telegram"}
    )
    return found or 0.0

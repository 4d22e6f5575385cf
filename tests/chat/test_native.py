"""Native streaming end to end: Telegram drafts and Slack streams, with the real client libraries
against the local Bot API and Web API fakes, the real agent and the scripted upstream.

The chat must end with the reply exactly once whatever transport shows it; ``auto`` picks the
native transport per chat type; the draft's stop button interrupts a turn like a new message.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from iris.events import Event, SegmentEnded, StreamReset, TextDelta, TurnEnded
from iris.surfaces.chat.consumer import StreamConsumer
from iris.surfaces.chat.platforms.base import IncomingMessage, Native
from iris.surfaces.chat.platforms.slack import SlackPlatform
from iris.surfaces.chat.reply import CURSOR
from iris.surfaces.chat.throttle import Throttle
from iris.surfaces.chat.transport import choose
from tests.chat.harness import platform_config, running
from tests.chat.sim import display
from tests.conftest import MakeConfig
from tests.fakes.slack_api import SlackAPI, message_event
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, gated, hold, text

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]

OWNER = 7
CHAT = 42
GROUP = -100123
CHUNKS = [f"word{i} " for i in range(50)]
REPLY = "".join(CHUNKS).strip()
SLACK_OWNER = "U0000042"
THREAD = "1764453000.000200"


# -- Telegram -------------------------------------------------------------------------------


@pytest.fixture
async def bot_api() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi() as fake:
        yield fake


def telegram(make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi, **shown: Any) -> Any:
    settings = {
        "token": api.token,
        "base_url": api.base_url,
        "allowed_users": [OWNER],
        "poll_timeout": 1,
    }
    display = {"platforms": {"telegram": shown}} if shown else {}
    return platform_config(make_config, upstream, "telegram", settings, display=display)


async def test_a_private_chat_previews_in_a_draft_then_gets_the_reply_once(
    make_config: MakeConfig, upstream: FakeUpstream, bot_api: FakeBotApi
) -> None:
    upstream.script(text(*CHUNKS, delay=0.03))
    async with running(telegram(make_config, upstream, bot_api)) as surface:
        bot_api.user_says(CHAT, OWNER, "tell me something")
        await bot_api.wait_until(lambda: bot_api.chat(CHAT) == [REPLY])
        await surface.idle()

    drafts = bot_api.drafts_in(CHAT)
    texts = [str(c.params.get("text") or "") for c in drafts]
    assert texts[0] == "", "Thinking… before the first word"
    assert len(drafts) >= 3, "the draft grew while the model wrote"
    assert all(REPLY.startswith(t) and not t.endswith(CURSOR) for t in texts)
    assert len({c.params["draft_id"] for c in drafts}) == 1, "one draft, animated"
    # (The cadence itself is exact on the virtual clock: test_native_plan.py.)
    # The reply itself: one sendMessage, never an edit.
    assert [c.method for c in bot_api.sent_in(CHAT)] == ["sendMessage"]
    assert bot_api.draft(CHAT) is None, "the message replaced the draft"


async def test_a_group_keeps_edit_streaming_and_edit_transport_is_honoured(
    make_config: MakeConfig, upstream: FakeUpstream, bot_api: FakeBotApi
) -> None:
    upstream.script(text(*CHUNKS[:20], delay=0.03), text(*CHUNKS[:20], delay=0.03))
    expected = "".join(CHUNKS[:20]).strip()
    async with running(telegram(make_config, upstream, bot_api)) as surface:
        bot_api.user_says(GROUP, OWNER, "@iris_bot hi all", chat_type="supergroup")
        await bot_api.wait_until(lambda: bot_api.chat(GROUP) == [expected])
        await surface.idle()
    async with running(telegram(make_config, upstream, bot_api, transport="edit")) as surface:
        bot_api.user_says(CHAT, OWNER, "hi")
        await bot_api.wait_until(lambda: bot_api.chat(CHAT) == [expected])
        await surface.idle()
    assert bot_api.drafts_in(GROUP) == [] and bot_api.drafts_in(CHAT) == []
    for chat in (GROUP, CHAT):
        methods = [c.method for c in bot_api.sent_in(chat)]
        assert methods[0] == "sendMessage" and "editMessageText" in methods


async def test_drafts_refused_fall_back_to_edits_with_one_log_line(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    bot_api: FakeBotApi,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "iris.surfaces.chat")
    bot_api.drafts = False  # a Bot API without sendMessageDraft
    upstream.script(text(*CHUNKS, delay=0.03), text("Second", " answer", delay=0.03))
    async with running(telegram(make_config, upstream, bot_api, transport="native")) as surface:
        bot_api.user_says(CHAT, OWNER, "first")
        await bot_api.wait_until(lambda: bot_api.chat(CHAT) == [REPLY])
        await surface.idle()
        bot_api.user_says(CHAT, OWNER, "second")
        await bot_api.wait_until(lambda: bot_api.chat(CHAT) == [REPLY, "Second answer"])
        await surface.idle()
    refused = [c for c in bot_api.calls if c.method == "sendMessageDraft"]
    assert len(refused) == 1, "asked once; the chat streams by edits from then on"
    assert "editMessageText" in [c.method for c in bot_api.sent_in(CHAT)]
    assert caplog.text.count("drafts refused") == 1


async def test_the_stop_button_interrupts_the_turn_like_a_new_message(
    make_config: MakeConfig, upstream: FakeUpstream, bot_api: FakeBotApi
) -> None:
    upstream.script(hold(*CHUNKS[:10]), text("Next", " answer"))
    shown = "".join(CHUNKS[:10])
    config = telegram(make_config, upstream, bot_api, can_stop=True)
    async with running(config) as surface:
        bot_api.user_says(CHAT, OWNER, "write a lot")
        await bot_api.wait_until(lambda: bot_api.draft(CHAT) == shown)
        assert bot_api.drafts_in(CHAT)[-1].params.get("can_stop") is True
        assert bot_api.stop_generation(CHAT)
        # The turn ends as interrupted: what the draft showed becomes the message, once.
        await bot_api.wait_until(lambda: bot_api.chat(CHAT) == [shown.strip()])
        await surface.idle()
        bot_api.user_says(CHAT, OWNER, "and now?")
        await bot_api.wait_until(lambda: bot_api.chat(CHAT) == [shown.strip(), "Next answer"])
        await surface.idle()
    history = upstream.requests[1].body["messages"]
    assert [m["content"] for m in history if m["role"] == "user"] == ["write a lot", "and now?"]
    assert any(m["role"] == "assistant" and shown.strip() in m["content"] for m in history)


async def test_a_stale_stop_button_stops_nothing(
    make_config: MakeConfig, upstream: FakeUpstream, bot_api: FakeBotApi
) -> None:
    """A press that names the draft of an earlier reply (a turn that is over) reaches the bot
    while the next reply is being written: that reply goes on; a press on its own draft
    stops it."""
    upstream.script(
        text("First", " answer"), gated(*CHUNKS[:20], after=10), gated(*CHUNKS[:20], after=10)
    )
    shown, whole = "".join(CHUNKS[:10]), "".join(CHUNKS[:20]).strip()
    config = telegram(make_config, upstream, bot_api, can_stop=True)
    async with running(config) as surface:
        bot_api.user_says(CHAT, OWNER, "first")
        await bot_api.wait_until(lambda: bot_api.chat(CHAT) == ["First answer"])
        await surface.idle()
        old = int(bot_api.drafts_in(CHAT)[-1].params["draft_id"])
        # A press on the finished turn's draft, with no turn running: nothing to stop.
        bot_api.press_stop_late(CHAT, old)
        await bot_api.wait_received()

        bot_api.user_says(CHAT, OWNER, "second")
        await bot_api.wait_until(lambda: bot_api.draft(CHAT) == shown)
        current = int(bot_api.drafts_in(CHAT)[-1].params["draft_id"])
        assert current != old, "a new reply never reuses a draft id of the chat"
        bot_api.press_stop_late(CHAT, old)
        await bot_api.wait_received()
        upstream.release()  # the reply goes on and ends whole
        await bot_api.wait_until(lambda: bot_api.chat(CHAT) == ["First answer", whole])
        await surface.idle()

        # The same press on the running reply's own draft stops it.
        upstream.reset_gate()
        bot_api.user_says(CHAT, OWNER, "third")
        await bot_api.wait_until(lambda: bot_api.draft(CHAT) == shown)
        third = int(bot_api.drafts_in(CHAT)[-1].params["draft_id"])
        bot_api.press_stop_late(CHAT, third)
        await bot_api.wait_until(lambda: len(bot_api.chat(CHAT)) == 3)
        await surface.idle()
    assert bot_api.chat(CHAT) == ["First answer", whole, shown.strip()]


# -- Slack ----------------------------------------------------------------------------------


@pytest.fixture
async def slack_api() -> AsyncIterator[SlackAPI]:
    async with SlackAPI() as fake:
        yield fake


def slack(make_config: MakeConfig, upstream: FakeUpstream, api: SlackAPI, **shown: Any) -> Any:
    settings = {
        "bot_token": api.bot_token,
        "app_token": api.app_token,
        "base_url": api.base_url,
        "allowed_users": [SLACK_OWNER],
    }
    display = {"platforms": {"slack": shown}} if shown else {}
    return platform_config(make_config, upstream, "slack", settings, display=display)


def _texts(api: SlackAPI) -> list[str]:
    return [m.text for m in api.messages.values()]


async def test_a_slack_thread_streams_deltas_and_ends_the_stream(
    make_config: MakeConfig, upstream: FakeUpstream, slack_api: SlackAPI
) -> None:
    upstream.script(text(*CHUNKS, delay=0.04))
    async with running(slack(make_config, upstream, slack_api)) as surface:
        await slack_api.push_event(
            message_event(SLACK_OWNER, "<@UBOT0001> tell me", thread_ts=THREAD)
        )
        await slack_api.wait_until(lambda: _texts(slack_api) == [REPLY])
        await surface.idle()

    calls = slack_api.calls_to(
        "chat.startStream", "chat.appendStream", "chat.stopStream", "chat.postMessage"
    )
    methods = [c.method for c in calls]
    assert methods[0] == "chat.startStream" and methods[-1] == "chat.stopStream"
    assert "chat.appendStream" in methods and "chat.postMessage" not in methods
    assert slack_api.calls_to("chat.update") == []
    assert all(c.ok for c in calls)
    assert calls[0].args["thread_ts"] == THREAD
    # Deltas: each call carries only what is new, and together they are the reply.
    pieces = [str(c.args.get("markdown_text") or "") for c in calls]
    assert "".join(pieces) == REPLY
    assert not any(m.streaming for m in slack_api.messages.values())


async def test_auto_picks_streams_in_dms_and_edits_at_a_channels_top_level(
    make_config: MakeConfig, upstream: FakeUpstream, slack_api: SlackAPI
) -> None:
    short = CHUNKS[:20]
    expected = "".join(short).strip()
    upstream.script(text(*short, delay=0.03), text(*short, delay=0.03))
    dm = {"channel": "D0000009", "channel_type": "im", "ts": "1764453200.000100"}
    async with running(slack(make_config, upstream, slack_api)) as surface:
        await slack_api.push_event(
            message_event(SLACK_OWNER, "<@UBOT0001> top level", channel_type="channel")
        )
        await slack_api.wait_until(lambda: _texts(slack_api) == [expected])
        await surface.idle()
        await slack_api.push_event(message_event(SLACK_OWNER, "<@UBOT0001> in a DM", **dm))
        await slack_api.wait_until(lambda: _texts(slack_api) == [expected, expected])
        await surface.idle()
    [post] = slack_api.calls_to("chat.postMessage")
    assert "chat.update" in [c.method for c in slack_api.calls]
    [start] = slack_api.calls_to("chat.startStream")
    assert start.args["channel"] == dm["channel"]
    assert start.args["thread_ts"] == dm["ts"], "a DM reply streams under the person's message"
    assert post.args["channel"] != dm["channel"]


async def test_tool_progress_is_a_task_timeline_in_the_stream(
    make_config: MakeConfig, upstream: FakeUpstream, slack_api: SlackAPI
) -> None:
    from tests.fakes.scenarios import tool_call

    upstream.script(
        # A tool that runs a while: its task shows running, then complete.
        tool_call("terminal", ['{"command": "sleep 1.5; echo hello"}'], content="Let me look."),
        text("It", " says hello.", delay=0.02),
    )
    config = slack(make_config, upstream, slack_api)
    config = config.model_copy(
        update={"tools": config.tools.model_copy(update={"enabled": ["terminal"]})}
    )
    async with running(config) as surface:
        await slack_api.push_event(
            message_event(SLACK_OWNER, "<@UBOT0001> read it", thread_ts=THREAD)
        )
        await slack_api.wait_until(lambda: "It says hello." in _texts(slack_api))
        await surface.idle()
    timelines = [m for m in slack_api.messages.values() if m.tasks]
    assert len(timelines) == 1
    [task] = timelines[0].tasks.values()
    assert task["title"].startswith("terminal") and task["status"] == "complete"
    statuses = [
        chunk["status"]
        for c in slack_api.calls
        if c.method.endswith("Stream")
        for chunk in c.args.get("chunks") or []
    ]
    # A progress note (the command's "hello") may update the running task on its own call.
    assert [status for status, _ in itertools.groupby(statuses)] == ["in_progress", "complete"]
    assert not any(m.streaming for m in slack_api.messages.values())
    assert [t for t in _texts(slack_api) if t] == ["Let me look.", "It says hello."]


async def test_a_reset_that_takes_text_back_ends_the_stream_and_continues_by_edit(
    slack_api: SlackAPI,
) -> None:
    from iris.config import SlackConfig

    settings = SlackConfig(
        enabled=True, bot_token=slack_api.bot_token, app_token="x", base_url=slack_api.base_url
    )
    platform = SlackPlatform(settings)
    incoming = IncomingMessage("slack", "C1", SLACK_OWNER, "hi", thread={"thread_ts": THREAD})
    native = choose(platform, incoming, "auto")
    assert native == Native("stream", {"thread_ts": THREAD})
    shown = display(edit_interval=0.05, min_tokens=1)
    consumer = StreamConsumer(
        platform,
        "C1",
        display=shown,
        streaming=True,
        throttle=Throttle(platform.capabilities.rate, 0.05),
        native=native,
    )

    async def turn() -> AsyncIterator[Event]:
        yield TextDelta("Hello ")
        yield TextDelta("world")
        await slack_api.wait_until(lambda: "Hello world" in _texts(slack_api))
        yield StreamReset("falling back to b", "b")
        yield TextDelta("Hello ")
        yield TextDelta("there")
        yield SegmentEnded("Hello there")
        yield TurnEnded("Hello there")

    try:
        await consumer.consume(turn())
    finally:
        await platform.disconnect()
    assert _texts(slack_api) == ["Hello there"], "the new text, once, in the same message"
    methods = [c.method for c in slack_api.calls if c.method.startswith("chat.")]
    assert methods[0] == "chat.startStream"
    stop = methods.index("chat.stopStream")
    assert methods[stop + 1 :] == ["chat.update"], methods
    assert not any(m.streaming for m in slack_api.messages.values())


async def test_a_workspace_that_refuses_streams_gets_edits_from_then_on(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    slack_api: SlackAPI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "iris.surfaces.chat")
    slack_api.streams = False  # chat.startStream answers unknown_method
    short = CHUNKS[:20]
    expected = "".join(short).strip()
    upstream.script(text(*short, delay=0.03), text("Second", " answer", delay=0.03))
    second = {"ts": "1764453101.000400", "event_ts": "1764453101.000400"}
    async with running(slack(make_config, upstream, slack_api)) as surface:
        await slack_api.push_event(message_event(SLACK_OWNER, "<@UBOT0001> one", thread_ts=THREAD))
        await slack_api.wait_until(lambda: _texts(slack_api) == [expected])
        await surface.idle()
        await slack_api.push_event(
            message_event(SLACK_OWNER, "<@UBOT0001> two", thread_ts=THREAD, **second)
        )
        await slack_api.wait_until(lambda: _texts(slack_api) == [expected, "Second answer"])
        await surface.idle()
    assert len(slack_api.calls_to("chat.startStream")) == 1, "asked once"
    assert [c.method for c in slack_api.calls_to("chat.postMessage")] == ["chat.postMessage"] * 2
    assert slack_api.calls_to("chat.update"), "the reply grew by edits"
    assert caplog.text.count("streams refused") == 1


# -- fresh final ------------------------------------------------------------------------------


async def test_a_long_visible_preview_gets_the_answer_as_a_fresh_message(
    make_config: MakeConfig, upstream: FakeUpstream, bot_api: FakeBotApi
) -> None:
    upstream.script(text(*CHUNKS, delay=0.03), text("Quick", " one"))
    config = telegram(make_config, upstream, bot_api, fresh_final_after=0.5)
    async with running(config) as surface:
        bot_api.user_says(GROUP, OWNER, "@iris_bot long", chat_type="supergroup")
        await bot_api.wait_until(lambda: bot_api.chat(GROUP) == [REPLY])
        await surface.idle()
        long_calls = [
            c.method
            for c in bot_api.sent_in(GROUP, "sendMessage", "editMessageText", "deleteMessage")
        ]
        bot_api.user_says(GROUP, OWNER, "@iris_bot short", chat_type="supergroup")
        await bot_api.wait_until(lambda: bot_api.chat(GROUP) == [REPLY, "Quick one"])
        await surface.idle()
    # The preview was up for > 0.5 s: the answer came as a new message, then the preview went.
    assert long_calls[0] == "sendMessage"
    assert long_calls[-2:] == ["sendMessage", "deleteMessage"]
    assert long_calls.count("sendMessage") == 2
    final = bot_api.sent_in(GROUP, "sendMessage")[1]
    assert final.params["text"] == REPLY
    # A reply that was never up as a preview that long is finished in place.
    short_calls = bot_api.sent_in(GROUP, "sendMessage", "editMessageText", "deleteMessage")
    assert [c.method for c in short_calls][len(long_calls) :] in (
        ["sendMessage"],
        ["sendMessage", "editMessageText"],
    )


async def test_a_fresh_final_that_cannot_be_sent_finishes_the_preview_in_place(
    make_config: MakeConfig, upstream: FakeUpstream, bot_api: FakeBotApi
) -> None:
    upstream.script(text(*CHUNKS, delay=0.03))
    config = telegram(make_config, upstream, bot_api, fresh_final_after=0.5)
    async with running(config) as surface:
        bot_api.user_says(GROUP, OWNER, "@iris_bot long", chat_type="supergroup")
        await bot_api.wait_until(lambda: len(bot_api.chat(GROUP)) == 1)
        bot_api.flood("sendMessage", retry_after=1, times=1)  # the fresh copy is refused
        await bot_api.wait_until(lambda: bot_api.chat(GROUP) == [REPLY])
        await surface.idle()
    assert bot_api.sent_in(GROUP, "deleteMessage") == []
    assert bot_api.sent_in(GROUP, "editMessageText")[-1].params["text"] == REPLY

"""Telegram end to end: the real agent and python-telegram-bot against local fakes over HTTP.

User messages arrive through getUpdates from ``FakeBotApi``; the agent streams from
``FakeUpstream``; the reply must grow as one sendMessage plus editMessageText calls within the
per-chat budget, survive flood control, and never reach the agent for a stranger.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError, TimedOut

from iris.surfaces.chat.platforms.base import PlatformRateLimited
from iris.surfaces.chat.platforms.telegram import TelegramPlatform, _platform_error
from iris.surfaces.chat.reply import CURSOR
from iris.surfaces.chat.runner import ChatSurface
from tests.chat.harness import running
from tests.chat.telegram.harness import CHAT, OWNER, telegram_config
from tests.conftest import MakeConfig
from tests.fakes.telegram_api import ApiCall, FakeBotApi
from tests.fakes.upstream import FakeUpstream, hold, text

pytestmark = [
    pytest.mark.timeout(30),
    # PTB 22 warns whenever it builds RetryAfter (retry_after becomes a timedelta in v23); the
    # adapter reads either type. Only this deprecation is ignored, only here.
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]

# A reply that streams for ~2.5 s: long enough for a send and several edits.
CHUNKS = [f"word{i} " for i in range(50)]
REPLY = "".join(CHUNKS).strip()


@pytest.fixture
async def gateway(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> AsyncIterator[ChatSurface]:
    async with running(telegram_config(make_config, upstream, api)) as surface:
        assert [type(p) for p in surface.platforms] == [TelegramPlatform]
        yield surface


def reply_calls(api: FakeBotApi, chat: int = CHAT) -> list[ApiCall]:
    return api.sent_in(chat)


async def test_a_reply_streams_as_one_message_edited_within_the_budget(
    gateway: ChatSurface, api: FakeBotApi, upstream: FakeUpstream
) -> None:
    upstream.script(text(*CHUNKS, delay=0.03))
    api.user_says(CHAT, OWNER, "tell me something")
    await api.wait_until(lambda: api.chat(CHAT) == [REPLY])
    await gateway.idle()

    calls = reply_calls(api)
    assert [c.method for c in calls][0] == "sendMessage"
    assert {c.method for c in calls[1:]} == {"editMessageText"}
    assert len(calls) >= 3, "the reply grew in place"
    assert all(str(c.params["text"]).endswith(CURSOR) for c in calls[:-1])
    assert calls[-1].params["text"] == REPLY
    # One call per second in a private chat, sends and edits together. The consumer issues
    # them >= 1 s apart (exact on the virtual clock in test_reply); arrival jitter on a loaded
    # 2-core machine can eat a little of that here.
    gaps = [b.t - a.t for a, b in zip(calls, calls[1:], strict=False)]
    assert min(gaps) >= 0.8
    assert api.unmodified == 0
    assert api.sent_in(CHAT, "sendChatAction"), "typing was shown"
    request = upstream.requests[0]
    assert request.stream and request.body["messages"][-1]["content"] == "tell me something"


async def test_flood_control_is_survived_with_retry_after(
    gateway: ChatSurface, api: FakeBotApi, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "iris.surfaces.chat.consumer")
    upstream.script(text(*CHUNKS, delay=0.03))
    api.flood("editMessageText", retry_after=1, times=1)
    api.user_says(CHAT, OWNER, "go")
    await api.wait_until(lambda: api.chat(CHAT) == [REPLY])
    await gateway.idle()

    timeline = [(round(c.t, 3), c.method, c.status) for c in api.calls]
    flooded = [c for c in api.calls if c.status == 429]
    assert len(flooded) == 1, timeline
    after = [c for c in api.calls if c.t > flooded[0].t and c.method != "sendChatAction"]
    assert after and after[0].t >= flooded[0].t + 1.0, timeline  # retry_after honoured
    sends = [c.method for c in reply_calls(api)].count("sendMessage")
    assert sends == 1, timeline  # never sent twice
    assert api.chat(CHAT) == [REPLY]
    assert "rate limited in 42: retry after 1.0s" in caplog.text  # seen as flood control
    assert "adapter raised" not in caplog.text


async def test_under_repeated_flood_control_the_remainder_comes_once_at_the_end(
    gateway: ChatSurface, api: FakeBotApi, upstream: FakeUpstream
) -> None:
    # ~5 s: three failed edits (at ~1, ~2 and ~4 s: the interval doubles) while it streams.
    chunks = [f"part{i} " for i in range(140)]
    reply = "".join(chunks).strip()
    upstream.script(text(*chunks, delay=0.035))
    api.flood("editMessageText", retry_after=1, times=3)
    api.user_says(CHAT, OWNER, "go")
    await api.wait_until(lambda: len(api.chat(CHAT)) == 2)
    await gateway.idle()

    timeline = [(round(c.t, 3), c.method, c.status) for c in api.calls]
    first, rest = api.chat(CHAT)
    assert not first.endswith(CURSOR), timeline  # the abandoned preview was cleaned up
    assert reply.startswith(first)
    assert rest == reply[len(first) :].strip()  # only the unseen remainder, nothing twice
    sends = [c for c in reply_calls(api) if c.method == "sendMessage"]
    assert len(sends) == 2
    last_flood = max(c.t for c in api.calls if c.status == 429)
    assert sends[1].t > last_flood  # delivered at the end, after editing stopped


async def test_a_stranger_is_refused_and_never_reaches_the_agent(
    gateway: ChatSurface, api: FakeBotApi, upstream: FakeUpstream
) -> None:
    api.user_says(99, 666, "run rm -rf /", username="mallory")
    api.user_says(99, 666, "please?", username="mallory")
    await api.wait_until(lambda: len(api.chat(99)) == 1)
    api.user_says(CHAT, 8, "hi", username="Friend")  # allowed by user name
    upstream.script(text("Hello", " friend"))
    await api.wait_until(lambda: api.chat(CHAT) == ["Hello friend"])
    await gateway.idle()
    assert "not" in api.chat(99)[0] or "private" in api.chat(99)[0]
    assert len(api.chat(99)) == 1  # one refusal, not one per message
    assert [r.body["messages"][-1]["content"] for r in upstream.requests] == ["hi"]


async def test_a_new_message_interrupts_the_streaming_reply_then_runs(
    gateway: ChatSurface, api: FakeBotApi, upstream: FakeUpstream
) -> None:
    upstream.script(hold(*CHUNKS[:10]), text("Second", " answer"))
    api.user_says(CHAT, OWNER, "first")
    first_text = "".join(CHUNKS[:10])
    await api.wait_until(lambda: any(first_text.strip() in m for m in api.chat(CHAT)))
    api.user_says(CHAT, OWNER, "second")
    await api.wait_until(lambda: len(api.chat(CHAT)) == 2 and api.chat(CHAT)[1] == "Second answer")
    await gateway.idle()
    assert api.chat(CHAT)[0] == first_text.strip()  # finalized without the cursor
    # The second turn saw the interrupted exchange in its history (SQLite sessions).
    history = upstream.requests[1].body["messages"]
    assert [m["content"] for m in history if m["role"] == "user"] == ["first", "second"]
    assert any(m["role"] == "assistant" and m["content"] for m in history)


async def test_thread_metadata_goes_with_every_call_of_a_reply(
    gateway: ChatSurface, api: FakeBotApi, upstream: FakeUpstream
) -> None:
    upstream.script(text(*CHUNKS[:30], delay=0.03))
    group = -100123
    api.user_says(group, OWNER, "@iris_bot in a topic", chat_type="supergroup", thread_id=77)
    expected = "".join(CHUNKS[:30]).strip()
    await api.wait_until(lambda: api.chat(group) == [expected])
    await gateway.idle()
    calls = api.sent_in(group, "sendMessage", "editMessageText", "sendChatAction")
    assert len(calls) >= 3
    assert all(c.params.get("message_thread_id") == 77 for c in calls)


async def test_iris_serve_starts_the_telegram_gateway(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    from iris.server.asgi import build_app

    upstream.script(text("Served", " by iris serve"))
    app = build_app(telegram_config(make_config, upstream, api))
    async with app.router.lifespan_context(app):
        api.user_says(CHAT, OWNER, "are you there?")
        await api.wait_until(lambda: api.chat(CHAT) == ["Served by iris serve"])
    assert api.calls[0].method == "getMe"  # the token was checked at startup


def _caused(exc: Exception, cause: BaseException) -> Exception:
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    ("make", "rate_limited", "maybe_landed"),
    [
        (lambda: RetryAfter(3), True, False),
        (lambda: _caused(TimedOut(), httpx.ReadTimeout("slow")), False, True),
        (lambda: _caused(TimedOut(), httpx.PoolTimeout("full")), False, False),
        (lambda: _caused(NetworkError("refused"), httpx.ConnectError("refused")), False, False),
        (lambda: BadRequest("Bad Request: chat not found"), False, False),
    ],
)
def test_telegram_errors_map_to_what_the_consumer_needs(
    make: Callable[[], TelegramError], rate_limited: bool, maybe_landed: bool
) -> None:
    # Built inside the test: RetryAfter warns on construction (ignored for this module only).
    mapped = _platform_error(make())
    assert isinstance(mapped, PlatformRateLimited) is rate_limited
    assert mapped.maybe_landed is maybe_landed
    if isinstance(mapped, PlatformRateLimited):
        assert mapped.retry_after == 3.0


@pytest.mark.parametrize(("threshold", "most"), [(24, None), (100_000, 1)])
async def test_buffer_threshold_brings_edits_sooner_than_the_edit_interval_within_the_budget(
    make_config: MakeConfig, upstream: FakeUpstream, threshold: int, most: int | None
) -> None:
    """A reply of ~5 s with ``edit_interval`` 6 s: on the interval alone the message is edited
    at most once before its final text; with ``buffer_threshold`` 24 (the default) an edit
    goes whenever 24 new characters wait, as often as the chat's budget allows (one a second
    plus the margin, counted on arrival by the fake: no 429)."""
    chunks = [f"word{i:03d} " for i in range(100)]  # 800 characters in ~5 s
    upstream.script(text(*chunks, delay=0.05))
    async with FakeBotApi(chat_rate=(1, 1.0)) as api:
        settings = {
            "enabled": True,
            "token": api.token,
            "base_url": api.base_url,
            "allowed_users": [OWNER],
            "poll_timeout": 1,
        }
        config = make_config(
            upstream.base_url,
            streaming={
                "enabled": True,
                "min_tokens": 3,
                "edit_interval": 6.0,
                "buffer_threshold": threshold,
            },
            display={"platforms": {"telegram": {"transport": "edit"}}},
            platforms={
                "api_server": {"enabled": False},
                "iris": {"enabled": False},
                "telegram": settings,
            },
            tools={"enabled": []},
        )
        async with running(config) as surface:
            api.user_says(chat_id=CHAT, user_id=OWNER, text="go")
            final = "".join(chunks).strip()
            await api.wait_until(lambda: api.chat(CHAT) == [final], within=20)
            await surface.idle()
        calls = reply_calls(api)
        previews = [c for c in calls if c.method == "editMessageText" and c.params["text"] != final]
        assert api.limited == 0
        arrivals = [c.arrived for c in calls]
        assert all(b - a >= 1.0 for a, b in zip(arrivals, arrivals[1:], strict=False))
        if most is None:
            assert len(previews) >= 3, "edits came as the budget allows, not every 6 s"
        else:
            assert len(previews) <= most, "the edit interval alone"

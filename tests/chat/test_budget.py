"""The bot's shared budget, pure: which chat's call goes when, given who asks for what."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iris.config import config_from_dict
from iris.errors import ConfigError
from iris.events import Event, SegmentEnded, TextDelta, TurnEnded
from iris.surfaces.chat.budget import STALE, Limit, Priority, RateBudget, Seat, SharedBudget
from iris.surfaces.chat.platforms.base import Capabilities
from iris.surfaces.chat.platforms.discord import DiscordPlatform
from iris.surfaces.chat.platforms.slack import SlackPlatform
from iris.surfaces.chat.platforms.telegram import TelegramPlatform
from iris.surfaces.chat.reply import Edit, Reply, Send
from iris.surfaces.chat.throttle import Throttle
from iris.surfaces.chat.transport import StreamTransport
from tests.chat.sim import display
from tests.fakes.native_platform import NativePlatform


def one_a_second() -> SharedBudget:
    return SharedBudget(
        [Limit("bot", RateBudget(1, 1.0, margin=0.0))], {"send": ["bot"], "edit": ["bot"]}
    )


def simulate(
    budget: SharedBudget, wants: dict[str, list[Priority]], *, start: float = 0.0
) -> list[tuple[float, str]]:
    """Every chat wants its calls, in order, from ``start`` and asks again whenever it was
    told to; the calls granted as (time, chat), in virtual time."""
    seats = {chat: budget.seat(chat) for chat in wants}
    left = {chat: list(calls) for chat, calls in wants.items()}
    granted: list[tuple[float, str]] = []
    now = start
    while any(left.values()):
        for chat in sorted(left):  # everyone who wants a call is in line first ...
            if left[chat]:
                seats[chat].ready_at("send", left[chat][0], now)
        due: list[float] = []
        for chat in sorted(left):  # ... then whoever may go now goes
            if not left[chat]:
                continue
            at = seats[chat].ready_at("send", left[chat][0], now)
            if at <= now:
                seats[chat].spend("send", now)
                granted.append((now, chat))
                left[chat].pop(0)
            else:
                due.append(at)
        if due and len(due) == sum(1 for calls in left.values() if calls):
            now = min(due)
    return granted


def test_finals_go_before_first_texts_before_previews() -> None:
    granted = simulate(
        one_a_second(),
        {"a": ["preview"], "b": ["preview"], "c": ["first"], "d": ["final"]},
    )
    assert granted == [(0.0, "d"), (1.0, "c"), (2.0, "a"), (3.0, "b")]


def test_previews_take_turns_when_the_budget_is_short() -> None:
    granted = simulate(one_a_second(), {chat: ["preview"] * 3 for chat in "abc"})
    chats = [chat for _, chat in granted]
    # Round robin: the chat served longest ago goes next; no chat goes twice before the others.
    assert chats == ["a", "b", "c"] * 3
    assert [t for t, _ in granted] == [float(i) for i in range(9)]


def test_a_final_jumps_the_line_of_previews() -> None:
    budget = one_a_second()
    granted = simulate(budget, {"a": ["preview"] * 2, "b": ["preview"] * 2, "z": ["final"]})
    assert [chat for _, chat in granted] == ["z", "a", "b", "a", "b"]


def test_a_chat_that_stops_asking_loses_its_place_after_stale() -> None:
    budget = one_a_second()
    gone, waiting = budget.seat("gone"), budget.seat("waiting")
    assert gone.ready_at("send", "final", 0.0) == 0.0
    # "gone" never spends: "waiting" is told to come after it ...
    assert waiting.ready_at("send", "preview", 0.0) == 1.0
    # ... until "gone" has let its time pass by more than STALE.
    assert waiting.ready_at("send", "preview", STALE + 0.01) == STALE + 0.01


def test_a_withdrawn_chat_no_longer_holds_anyone_up() -> None:
    budget = one_a_second()
    a, b = budget.seat("a"), budget.seat("b")
    a.ready_at("send", "final", 0.0)
    a.withdraw()
    assert b.ready_at("send", "preview", 0.0) == 0.0


def test_typing_takes_only_what_nobody_waits_for() -> None:
    budget = SharedBudget(
        [Limit("global", RateBudget(2, 1.0, margin=0.0))],
        {"send": ["global"], "typing": ["global"]},
    )
    assert budget.spare("typing", 0.0)
    assert not budget.spare("typing", 0.1), "the next token is 0.5 s away"
    seat = budget.seat("a")
    assert seat.ready_at("send", "preview", 0.5) == 0.5
    assert not budget.spare("typing", 0.5), "a chat waits for it"
    seat.spend("send", 0.5)
    assert budget.spare("typing", 1.0)


def test_a_global_429_holds_every_chat() -> None:
    budget = one_a_second()
    budget.block(5.0)
    assert [t for t, _ in simulate(budget, {"a": ["final"], "b": ["first"]})] == [5.0, 6.0]


def test_kinds_draw_on_their_own_limits() -> None:
    # Slack: posts are paced per channel only; chat.update is shared by the workspace.
    budget = SharedBudget(
        [Limit("chat.update", RateBudget(1, 1.0, margin=0.0))], {"edit": ["chat.update"]}
    )
    a, b = budget.seat("a"), budget.seat("b")
    a.spend("edit", 0.0)
    assert b.ready_at("send", "first", 0.0) == 0.0
    assert b.ready_at("edit", "preview", 0.0) == 1.0


def three_a_second_in_bursts() -> SharedBudget:
    return SharedBudget([Limit("m", RateBudget(3, 1.0, margin=0.0), burst=True)], {"send": ["m"]})


def test_a_burst_limit_lets_first_texts_and_finals_go_at_once_while_the_window_has_room() -> None:
    granted = simulate(
        three_a_second_in_bursts(),
        {"a": ["first"], "b": ["first"], "c": ["final"], "d": ["first"], "p": ["preview"] * 2},
    )
    assert sorted(chat for t, chat in granted if t == 0.0) == ["a", "b", "c"]
    # The window is full until its first calls are a second old; previews are paced.
    later = [(t, chat) for t, chat in granted if t > 0.0]
    assert later == [(1.0, "d"), (1.0, "p"), (pytest.approx(1.0 + 1 / 3), "p")]


def test_a_burst_limit_paces_previews_and_never_overfills_a_window() -> None:
    wants: dict[str, list[Priority]] = {
        "a": ["first", "preview", "preview", "final"],
        "b": ["first", "preview", "final"],
        "c": ["preview"] * 5,
        "d": ["final", "first"],
    }
    granted = simulate(three_a_second_in_bursts(), wants)
    previews = [t for t, chat in granted if chat == "c"]
    assert all(b - a >= 1 / 3 - 1e-9 for a, b in zip(previews, previews[1:], strict=False))
    times = [t for t, _ in granted]
    assert all(sum(1 for u in times if s <= u < s + 1.0 - 1e-9) <= 3 for s in times)


def test_a_platform_429_holds_a_burst_limit_too() -> None:
    budget = three_a_second_in_bursts()
    budget.block(5.0)
    assert [t for t, _ in simulate(budget, {"a": ["final"], "b": ["first"]})] == [5.0, 5.0]


def test_slack_stream_calls_draw_on_their_methods_budgets_not_chat_updates() -> None:
    """Each call waits for the budget of the method it makes: a stream's append for
    chat.appendStream's, the same message continued by chat.update (after a reset took text
    back) for chat.update's."""
    config = config_from_dict(
        {
            "platforms": {
                "slack": {
                    "budgets": {
                        "update": {"calls": 1, "per": 10, "margin": 0},
                        "stream": {"calls": 1, "per": 1, "margin": 0},
                    }
                }
            }
        },
        env={},
    )
    budget = SlackPlatform(config.platforms.slack).budget
    platform = NativePlatform(kind="stream", budget=budget)
    transport = StreamTransport(platform, "D1", {"thread_ts": "1.0"})
    message_id = asyncio.run(transport.send(Send(0, "Hello")))

    append = Edit(0, message_id, "Hello world")
    assert transport.draws(append) == ("stream_append",)
    assert transport.draws(Edit(0, message_id, "Hello world", final=True)) == ("stream_stop",)
    assert transport.draws(Send(1, "More")) == ("stream_start",)
    assert transport.draws(Send(1, "Settled", final=True)) == ("send",)  # chat.postMessage

    # One chat's append does not hold up another's chat.update, nor its stream's start.
    a, b = budget.seat("D1"), budget.seat("D2")
    a.spend(transport.draws(append), 0.0)
    assert b.ready_at("edit", "preview", 0.0) == 0.0
    assert b.ready_at("stream_start", "first", 0.0) == 0.0
    assert b.ready_at("stream_append", "preview", 0.0) == 1.0, "appends share one budget"
    b.withdraw()

    # A reset takes text back: the stream is stopped and the message goes on by chat.update,
    # on chat.update's budget (and the stop on chat.stopStream's).
    reset = Edit(0, message_id, "Hi")
    assert transport.draws(reset) == ("stream_stop", "edit")
    a.spend(transport.draws(reset), 1.0)
    asyncio.run(transport.edit(reset))
    assert platform.calls == ["start", "stop", "edit"]
    assert transport.draws(Edit(0, message_id, "Hi there")) == ("edit",)
    assert b.ready_at("edit", "preview", 1.0) == 11.0, "chat.update: one per 10 s"
    assert b.ready_at(("stream_append",), "preview", 1.0) == 1.0


def test_an_invalid_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="rate budget"):
        SharedBudget([Limit("bot", RateBudget(0, 1.0, margin=0.0))])
    with pytest.raises(ValueError, match="unknown limits"):
        SharedBudget([Limit("bot", RateBudget(1, 1.0, margin=0.0))], {"send": ["global"]})


def test_a_throttle_waits_its_own_rules_before_taking_a_place_in_line() -> None:
    budget = one_a_second()
    other = budget.seat("other")
    throttle = Throttle(RateBudget(1, 1.0, margin=0.0), edit_interval=2.0, seat=budget.seat("me"))
    throttle.spend("send", 0.0)
    # Its own edit interval says 2.0: meanwhile it does not hold "other" up.
    assert throttle.ready_at("edit", 0.5) == 2.0
    assert other.ready_at("send", "preview", 1.0) == 1.0


# -- the budget is never exceeded ---------------------------------------------------------------

_priorities = st.sampled_from(["final", "first", "preview"])
_step = st.tuples(
    st.integers(0, 5),  # which chat
    st.sampled_from(["ask", "withdraw", "block"]),
    _priorities,
    st.integers(0, 400),  # ms until this step
)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(_step, max_size=120),
    capacity=st.integers(1, 5),
    per_ms=st.integers(100, 2000),
)
def test_no_window_ever_sees_more_calls_than_the_budget(
    steps: list[tuple[int, str, Priority, int]], capacity: int, per_ms: int
) -> None:
    """Whatever chats ask, withdraw, or a 429 blocks, and whenever: calls that went out when
    they were told they may never number more than ``capacity`` in any ``per`` window."""
    per = per_ms / 1000
    budget = SharedBudget([Limit("bot", RateBudget(capacity, per, margin=0.0))], {"send": ["bot"]})
    seats: dict[int, Seat] = {}
    spent: list[float] = []
    now = 0.0
    for chat, what, priority, wait_ms in steps:
        now += wait_ms / 1000
        seat = seats.setdefault(chat, budget.seat(str(chat)))
        if what == "withdraw":
            seat.withdraw()
        elif what == "block":
            budget.block(now + per)
        elif seat.ready_at("send", priority, now) <= now:
            seat.spend("send", now)
            spent.append(now)
        elif budget.spare("send", now):  # a courtesy call squeezes in only when it fits
            spent.append(now)
    for start in spent:
        # Half-open windows; the tolerance absorbs float rounding of the spacing sums.
        inside = [t for t in spent if start <= t < start + per - 1e-9]
        assert len(inside) <= capacity


@settings(max_examples=200, deadline=None)
@given(
    wants=st.dictionaries(
        st.sampled_from("abcdef"), st.lists(_priorities, min_size=1, max_size=4), min_size=1
    )
)
def test_every_chat_is_served_and_finals_never_wait_behind_previews(
    wants: dict[str, list[Priority]],
) -> None:
    granted = simulate(one_a_second(), wants)
    assert sorted(chat for _, chat in granted) == sorted(
        c for c, calls in wants.items() for _ in calls
    )
    # All ask at once: the first call granted is a final whenever any chat's first call is one.
    if any(calls[0] == "final" for calls in wants.values()):
        first = granted[0][1]
        assert wants[first][0] == "final"


# -- many chats' replies on one budget, in virtual time ------------------------------------------


@dataclass(frozen=True)
class Granted:
    t: float
    chat: str
    kind: str  # "send" | "preview" | "final"


def crowd(
    streams: dict[str, list[tuple[float, Event]]],
    budget: SharedBudget,
    *,
    interval: float = 0.5,
    latency: float = 0.05,
) -> tuple[list[Granted], dict[str, str]]:
    """The real ``Reply`` and ``Throttle`` of every chat on one shared budget, in virtual time.

    Like the consumers: each chat makes one call at a time and asks again when told to; every
    chat that may call at a moment is in line before any call goes. Returns the calls in order
    and what each chat finally shows."""
    shown = display(edit_interval=interval, min_tokens=3)
    caps = Capabilities(True, 4096, "utf16", RateBudget(1, 1.0, margin=0.0))
    replies = {chat: Reply(caps, shown, preview=True) for chat in streams}
    throttles = {chat: Throttle(caps.rate, interval, seat=budget.seat(chat)) for chat in streams}
    queued = {chat: sorted(events, key=lambda item: item[0]) for chat, events in streams.items()}
    busy: dict[str, float] = {}
    visible: dict[str, str] = {}
    calls: list[Granted] = []
    t = 0.0
    for _ in range(100_000):
        for chat, reply in replies.items():
            while queued[chat] and queued[chat][0][0] <= t:
                reply.apply(queued[chat].pop(0)[1])
        idle = [chat for chat in sorted(replies) if busy.get(chat, -1.0) <= t]
        for chat in idle:  # everyone who may call now is in line ...
            replies[chat].due(throttles[chat], t)
        for chat in idle:  # ... before anyone calls
            reply = replies[chat]
            action = reply.next_action(throttles[chat], t)
            if action is None:
                continue
            final = reply.ended
            kind = "send" if isinstance(action, Send) else "final" if final else "preview"
            calls.append(Granted(t, chat, kind))
            busy[chat] = t + latency
            visible[chat] = action.text
            if isinstance(action, Send):
                reply.landed(action, throttles[chat], chat)
            else:
                reply.landed(action, throttles[chat])
        if all(not queued[c] and replies[c].settled for c in replies):
            return calls, visible
        times = [busy[c] for c in busy if busy[c] > t]
        times += [queued[c][0][0] for c in queued if queued[c]]
        for chat in replies:
            due = replies[chat].due(throttles[chat], t)
            if due is not None:
                times.append(max(due, busy.get(chat, t)))
        t = max(t + 1e-6, min(times))
    raise AssertionError("the crowd never settled")


def reply_events(words: int, *, every: float, ends: float) -> list[tuple[float, Event]]:
    text = "".join(f"w{i} " for i in range(words))
    events: list[tuple[float, Event]] = [(i * every, TextDelta(f"w{i} ")) for i in range(words)]
    return [*events, (ends, SegmentEnded(text)), (ends, TurnEnded(text))]


def test_in_a_crowd_every_chat_shows_text_first_previews_share_and_finals_go_first() -> None:
    # Ten chats stream at once; the bot may make 5 calls a second in all.
    budget = SharedBudget(
        [Limit("bot", RateBudget(5, 1.0, margin=0.0))], {"send": ["bot"], "edit": ["bot"]}
    )
    chats = [f"c{n}" for n in range(10)]
    # Each reply streams for 6 s; they end one after the other, 0.5 s apart.
    ends = {chat: 6.0 + 0.5 * n for n, chat in enumerate(chats)}
    streams = {chat: reply_events(60, every=0.1, ends=ends[chat]) for chat in chats}
    calls, visible = crowd(streams, budget)

    text = "".join(f"w{i} " for i in range(60))
    assert visible == {chat: text for chat in chats}, "every reply whole"
    assert [c.kind for c in calls if c.kind == "send"] == ["send"] * 10, "once each"
    # Every chat's first text comes before any chat's second call.
    assert {c.chat for c in calls[:10]} == set(chats)
    assert all(c.kind == "send" for c in calls[:10])
    # While all stream, previews take turns: no chat is more than one edit ahead of another.
    streaming = [c for c in calls if c.kind == "preview" and c.t < min(ends.values())]
    counts = [sum(1 for c in streaming if c.chat == chat) for chat in chats]
    assert max(counts) - min(counts) <= 1, counts
    # A final waits for the chat's own pace and at most one shared slot, not the line of
    # previews (ten chats deep: two seconds).
    for chat in chats:
        final = next(c for c in calls if c.chat == chat and c.kind == "final")
        assert final.t - ends[chat] <= 1.0 + 1 / 5 + 1e-9
    # No budget window was exceeded.
    times = [c.t for c in calls]
    assert all(sum(1 for u in times if s <= u < s + 1.0 - 1e-9) <= 5 for s in times)


# -- configuration ------------------------------------------------------------------------------


def test_each_adapter_builds_its_budgets_from_its_platform_section() -> None:
    config = config_from_dict(
        {
            "platforms": {
                "telegram": {
                    "token": "1:x",
                    "budgets": {"bot": {"calls": 10, "per": 2, "margin": 0.1}},
                },
                "slack": {
                    "budgets": {
                        "update": {"calls": 20, "per": 60},
                        "stream": {"calls": 30, "per": 60},
                    }
                },
                "discord": {"budgets": {"channel": {"calls": 4, "per": 4}}},
            }
        },
        env={},
    )
    telegram = TelegramPlatform(config.platforms.telegram)
    # 10 calls per 2 s, paced over 2.1 s: one every 0.21 s.
    assert [(lim.name, lim.spacing) for lim in telegram.budget.limits] == [
        ("bot", pytest.approx(0.21))
    ]
    # Every budget not given a margin has the default one (BUDGET_MARGIN: 50 ms).
    assert telegram.capabilities.rate == RateBudget(1, 1.0, margin=0.05)
    assert telegram.capabilities.group_rate == RateBudget(20, 60.0, margin=0.05)
    slack = SlackPlatform(config.platforms.slack)
    # Per method per workspace: chat.update, and each stream method on its own.
    assert [(lim.name, lim.spacing) for lim in slack.budget.limits] == [
        ("chat.update", pytest.approx(60.05 / 20)),
        ("chat.startStream", pytest.approx(60.05 / 30)),
        ("chat.appendStream", pytest.approx(60.05 / 30)),
        ("chat.stopStream", pytest.approx(60.05 / 30)),
        ("chat.delete", pytest.approx(60.05 / 45)),
    ]
    assert slack.capabilities.rate == RateBudget(1, 1.0)  # chat.postMessage per channel
    discord = DiscordPlatform(config.platforms.discord)
    assert [(lim.name, lim.rate) for lim in discord.budget.limits] == [
        ("global", RateBudget(40, 1.0))
    ]
    assert discord.capabilities.rate == RateBudget(4, 4.0)


@pytest.mark.parametrize(
    ("rate", "key"),
    [
        ({"calls": 0, "per": 1}, "platforms.telegram.budgets.bot.calls"),
        ({"calls": 5, "per": 0}, "platforms.telegram.budgets.bot.per"),
        ({"calls": 5, "per": 1, "burst": 2}, "platforms.telegram.budgets.bot.burst"),
        ({"calls": 5, "per": 1, "margin": -0.1}, "platforms.telegram.budgets.bot.margin"),
    ],
)
def test_a_bad_budget_is_a_config_error_naming_the_key(rate: dict[str, float], key: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(key)):
        config_from_dict({"platforms": {"telegram": {"budgets": {"bot": rate}}}}, env={})


def test_a_held_seat_waits_out_of_line() -> None:
    budget = one_a_second()
    held, other = budget.seat("held"), budget.seat("other")
    budget.hold("held", 3.0, now=0.0)
    assert held.ready_at("send", "final", 0.0) == 3.0
    assert other.ready_at("send", "preview", 0.0) == 0.0, "not behind the held one"
    assert held.ready_at("send", "final", 3.0) == 3.0


def test_seats_are_scoped_by_chat_and_thread_unless_the_platform_says_otherwise() -> None:
    budget = one_a_second()
    assert budget.seat("c1", {"thread_ts": "9"}).key == "c1:9"
    assert budget.seat("c1").key == "c1"
    channel = SharedBudget(scope=lambda chat, thread: thread.get("thread_id") or chat)
    assert channel.seat("c1", {"thread_id": "t7"}).key == "t7"

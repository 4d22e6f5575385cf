"""The bot's shared budget, pure: which chat's call goes when, given who asks for what."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iris.surfaces.chat.budget import STALE, Limit, Priority, Seat, SharedBudget
from iris.surfaces.chat.platform import RateBudget
from iris.surfaces.chat.throttle import Throttle


def one_a_second() -> SharedBudget:
    return SharedBudget([Limit("bot", RateBudget(1, 1.0))], {"send": ["bot"], "edit": ["bot"]})


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
        [Limit("global", RateBudget(2, 1.0))], {"send": ["global"], "typing": ["global"]}
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
    budget = SharedBudget([Limit("chat.update", RateBudget(1, 1.0))], {"edit": ["chat.update"]})
    a, b = budget.seat("a"), budget.seat("b")
    a.spend("edit", 0.0)
    assert b.ready_at("send", "first", 0.0) == 0.0
    assert b.ready_at("edit", "preview", 0.0) == 1.0


def test_an_invalid_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="rate budget"):
        SharedBudget([Limit("bot", RateBudget(0, 1.0))])
    with pytest.raises(ValueError, match="unknown limits"):
        SharedBudget([Limit("bot", RateBudget(1, 1.0))], {"send": ["global"]})


def test_a_throttle_waits_its_own_rules_before_taking_a_place_in_line() -> None:
    budget = one_a_second()
    other = budget.seat("other")
    throttle = Throttle(RateBudget(1, 1.0), edit_interval=2.0, seat=budget.seat("me"))
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
    budget = SharedBudget([Limit("bot", RateBudget(capacity, per))], {"send": ["bot"]})
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

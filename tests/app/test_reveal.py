"""The reveal scheduler, driven by a fake clock: rates, catch-up, rewrites, graphemes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iris.app.core.graphemes import is_boundary
from iris.app.core.reveal import Reveal, chars_per_second

FRAME = 1 / 30


def play(reveal: Reveal, until: float, start: float = 0.0) -> list[int]:
    """Tick at 30 Hz from start to until; returns characters revealed per tick."""
    steps: list[int] = []
    now = start
    while now < until - 1e-9:
        now += FRAME
        before = reveal.shown
        reveal.tick(now)
        steps.append(reveal.shown - before)
    return steps


@pytest.mark.parametrize(("smoothness", "rate"), [(0.2, 300), (0.3, 200), (0.5, 120), (0.8, 75)])
def test_smoothness_maps_to_sixty_over_seconds(smoothness: float, rate: float) -> None:
    assert chars_per_second(smoothness) == pytest.approx(rate)


@pytest.mark.parametrize("smoothness", [0.2, 0.5, 0.8])
def test_small_backlog_reveals_at_the_base_rate(smoothness: float) -> None:
    rate = chars_per_second(smoothness)
    reveal = Reveal(smoothness, now=0.0)
    # A backlog below 0.75 s of reveal keeps the base rate.
    text = "a" * int(rate * 0.7)
    reveal.push(text, now=0.0)
    play(reveal, until=0.3)
    assert reveal.shown == pytest.approx(rate * 0.3, abs=1)
    assert reveal.jumps == 0


def test_rate_change_applies_at_once() -> None:
    reveal = Reveal(0.8, now=0.0)  # 75 chars/s
    reveal.push("a" * 50, now=0.0)
    play(reveal, until=0.2)
    slow = reveal.shown
    assert slow == pytest.approx(15, abs=1)
    reveal.set_smoothness(0.2)  # 300 chars/s from the next tick on
    play(reveal, until=0.3, start=0.2)
    assert reveal.shown - slow == pytest.approx(30, abs=1)


def test_backlog_beyond_two_seconds_is_revealed_at_once() -> None:
    reveal = Reveal(0.5, now=0.0)  # 120 chars/s: 2 s is 240 characters
    reveal.push("a" * 200, now=0.0)
    assert reveal.shown == 0 and reveal.jumps == 0  # within 2 s: typewriter
    reveal2 = Reveal(0.5, now=0.0)
    reveal2.push("a" * 5_000, now=0.0)  # a reconnect or a dump
    assert reveal2.shown == 5_000 and reveal2.jumps == 1


# 48: the iris socket's default cadence; 24: the old one, for comparison (same steps).
@pytest.mark.parametrize("update", [24, 48])
def test_outpacing_model_is_followed_without_jumps(update: int) -> None:
    """20 000 characters at 4x the base rate in snapshots of ``update`` characters: no jump,
    small steps."""
    reveal = Reveal(0.8, now=0.0)  # 75 chars/s
    arrival = 300.0
    text = "word " * 4_000
    sent, now, steps = 0, 0.0, [0]
    next_push = 0.0
    while reveal.shown < len(text):
        if sent < len(text) and next_push <= now:
            sent += update
            reveal.push(text[:sent], now=now)
            next_push += update / arrival
            continue
        now += FRAME
        before = reveal.shown
        reveal.tick(now)
        steps.append(reveal.shown - before)
    assert reveal.jumps == 0
    # Ordinary streaming advances by about (arrival rate / 30) per frame, never by hundreds.
    assert max(steps) <= 2 * arrival * FRAME
    # And it keeps up: done within two seconds of the last snapshot.
    assert now <= len(text) / arrival + 2.0


def test_plain_two_second_rule_would_jump_where_ours_does_not() -> None:
    """The reason for the proportional rate: at a fixed 75 chars/s the backlog crosses 2 s."""
    arrival, base = 300.0, 75.0
    backlog_after_one_second = arrival - base
    assert backlog_after_one_second > 2 * base  # the plain rule would fire within a second


def test_bursts_at_a_steady_pace_are_not_dumps() -> None:
    reveal = Reveal(0.8, now=0.0)
    text = "b" * 8_000
    now, sent = 0.0, 0
    while sent < len(text):
        sent += 400  # the gateway's 0.8 s cadence with a fast model
        reveal.push(text[:sent], now=now)
        play(reveal, until=now + 0.8, start=now)
        now += 0.8
    assert reveal.jumps <= 1  # only the very first burst, before any pace is known


def test_rewrite_restarts_from_the_common_prefix() -> None:
    reveal = Reveal(0.2, now=0.0)
    reveal.push("Hello world, this is", now=0.0)
    play(reveal, until=1.0)
    assert reveal.text == "Hello world, this is"
    reveal.push("Hello there", now=1.0)
    assert reveal.text == "Hello "
    play(reveal, until=2.0, start=1.0)
    assert reveal.text == "Hello there"


def test_reveal_never_cuts_inside_a_grapheme() -> None:
    text = "👨‍👩‍👧‍👦 é 🇫🇷🇩🇪 👍🏽 1️⃣ " * 20
    reveal = Reveal(0.8, now=0.0)
    reveal.push(text, now=0.0)
    now = 0.0
    while not reveal.caught_up:
        now += FRAME / 3
        reveal.tick(now)
        assert is_boundary(text, reveal.shown), repr(reveal.text[-6:])


@given(
    st.lists(
        st.tuples(
            st.lists(
                st.sampled_from(["a", "b", " ", "\n", "é", "👍🏽", "🇫🇷", "👨‍👩‍👧"]), max_size=20
            ).map("".join),
            st.booleans(),  # extend the snapshot, or rewrite it
            st.floats(0, 0.5),  # time until the next snapshot
        ),
        max_size=30,
    ),
    st.sampled_from([0.2, 0.5, 0.8]),
)
def test_shown_text_is_always_a_whole_grapheme_prefix_of_the_latest_snapshot(
    pushes: list[tuple[str, bool, float]], smoothness: float
) -> None:
    reveal, now, snapshot = Reveal(smoothness, now=0.0), 0.0, ""
    for text, extend, wait in pushes:
        snapshot = snapshot + text if extend else text
        reveal.push(snapshot, now=now)
        for _ in range(int(wait * 30)):
            now += FRAME
            reveal.tick(now)
            assert snapshot.startswith(reveal.text)
            assert is_boundary(snapshot, reveal.shown)
    for _ in range(400):  # given time, it always catches up
        now += FRAME
        reveal.tick(now)
    assert reveal.text == snapshot

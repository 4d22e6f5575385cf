"""The per-chat throttle: budget shared by sends and edits, edit interval, 429 back-off."""

from __future__ import annotations

import pytest

from iris.surfaces.chat.budget import RateBudget
from iris.surfaces.chat.throttle import Throttle


def test_sends_and_edits_share_the_budget() -> None:
    throttle = Throttle(RateBudget(20, 60.0, margin=0.0), edit_interval=0.5)
    assert throttle.ready_at("send", 0.0) == 0.0
    throttle.spend("send", 0.0)
    # A group allows 20 a minute: the next call of either kind waits 3 s.
    assert throttle.ready_at("send", 0.0) == pytest.approx(3.0)
    assert throttle.ready_at("edit", 0.0) == pytest.approx(3.0)


def test_edits_wait_the_edit_interval_after_any_visible_update() -> None:
    throttle = Throttle(RateBudget(1, 1.0, margin=0.0), edit_interval=1.5)
    throttle.spend("send", 10.0)
    assert throttle.ready_at("send", 10.0) == pytest.approx(11.0)
    assert throttle.ready_at("edit", 10.0) == pytest.approx(11.5)


def test_a_429_blocks_for_retry_after_and_doubles_the_interval_until_a_success() -> None:
    throttle = Throttle(RateBudget(1, 1.0, margin=0.0), edit_interval=1.0)
    throttle.spend("edit", 0.0)
    throttle.rate_limited(7.0, 0.1)
    assert throttle.ready_at("send", 0.2) == pytest.approx(7.1)
    assert throttle.interval == 2.0
    throttle.rate_limited(1.0, 8.0)
    assert throttle.interval == 4.0
    throttle.succeeded()
    assert throttle.interval == 1.0


def test_an_invalid_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="rate budget"):
        Throttle(RateBudget(0, 1.0, margin=0.0), edit_interval=1.0)

"""Turn slots: a total bound and a bound per caller, released once."""

from __future__ import annotations

from iris.turn_slots import TurnLimiter


def test_turn_slots_bound_the_total_and_each_key() -> None:
    turns = TurnLimiter(3)
    a1 = turns.acquire("a", 2)
    a2 = turns.acquire("a", 2)
    assert a1 is not None and a2 is not None
    assert turns.acquire("a", 2) is None  # a's own limit
    b = turns.acquire("b", 2)
    assert b is not None
    assert turns.acquire("c", 2) is None  # the total
    a1.release()
    a1.release()  # twice is once
    assert turns.running == 2 and turns.running_for("a") == 1
    assert turns.acquire() is not None
    a2.release()
    assert turns.running_for("a") == 0

"""No self-caused 429 at the edge of a budget: calls as the platform counts them, on arrival.

The platform counts a call when it reaches it, somewhere between Iris's send and the answer;
two calls sent one interval apart arrive closer when the first took longer to get there. The
chat's throttle paces by the budget's window plus ``margin`` and counts a slot from the answer
too, so no two calls of a chat arrive closer than the platform's interval, whatever the way.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from iris.config import BUDGET_MARGIN
from iris.events import SegmentEnded, TurnEnded
from iris.surfaces.chat.budget import RateBudget
from tests.chat.sim import TELEGRAM, Delay, deltas, display, simulate

WORDS = [f"word{i:05d} " for i in range(500)]  # 5 000 characters: two Telegram messages
TEXT = "".join(WORDS).strip()

# A call's way there and back: from instant to a slow network, drawn per call.
delay = st.builds(
    Delay,
    there=st.floats(0.0, 0.4, allow_nan=False),
    back=st.floats(0.0, 0.4, allow_nan=False),
)


@settings(max_examples=25, deadline=None)
@given(
    budget=st.sampled_from(
        [RateBudget(1, 1.0), RateBudget(20, 60.0), RateBudget(5, 5.0), RateBudget(1, 1.0, 0.0)]
    ),
    delays=st.lists(delay, min_size=1, max_size=40),
    every=st.sampled_from([0.002, 0.01, 0.05]),
)
def test_no_two_calls_of_a_chat_arrive_closer_than_the_platforms_interval(
    budget: RateBudget, delays: list[Delay], every: float
) -> None:
    events = [
        *deltas(WORDS, every=every),
        (len(WORDS) * every, SegmentEnded(TEXT)),
        (len(WORDS) * every, TurnEnded(TEXT)),
    ]
    result = simulate(events, shown=display(), budget=budget, delays=delays)
    assert "".join(result.chat()).replace(" ", "") == TEXT.replace(" ", "")
    arrivals = sorted(call.arrived for call in result.calls)
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    # The platform's own interval, no margin: what it counts.
    assert min(gaps) >= budget.per_seconds / budget.capacity - 1e-9


def test_a_split_reply_leaves_the_margin_between_sends_when_answers_come_back_at_once() -> None:
    """With answers at once, the send rule is the stricter: the margin is what separates them."""
    events = [(0.0, SegmentEnded(TEXT)), (0.0, TurnEnded(TEXT))]
    result = simulate(events, shown=display(), budget=TELEGRAM.rate, latency=0.0)
    sends = [call.t for call in result.calls]
    assert len(sends) == 2
    assert [b - a for a, b in itertools.pairwise(sends)] == [1.0 + BUDGET_MARGIN]


def test_a_slow_answer_pushes_the_next_call_an_interval_past_it() -> None:
    """The first send took 0.3 s to reach the platform and 0.5 s to answer: the next goes an
    interval after the answer, not a second after the send."""
    events = [(0.0, SegmentEnded(TEXT)), (0.0, TurnEnded(TEXT))]
    delays = [Delay(0.3, 0.2), Delay(0.0, 0.0)]
    result = simulate(events, shown=display(), budget=TELEGRAM.rate, delays=delays)
    assert [call.t for call in result.calls] == [0.0, 1.5]

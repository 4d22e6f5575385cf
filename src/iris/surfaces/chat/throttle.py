"""The edit throttle of one chat: when the next send or edit may go out. Pure: callers pass ``now``.

Three rules per chat/channel, and one across the bot:

- the platform budget, a token bucket shared by sends and edits (Telegram edits share the
  per-chat budget with sends: pacing edits alone is what drew flood penalties elsewhere);
- ``edit_interval`` between a visible update and the next edit, stretched after flood control;
  an edit with ``buffer_threshold`` new characters waiting (``early``) need not wait for it,
  unless the chat met flood control since its last success;
- a 429 blocks every call for ``retry_after`` seconds;
- the bot's shared budget (``budget.SharedBudget``, owned by the platform adapter), asked
  through this chat's ``Seat`` once the chat's own rules allow a call: it says when this chat's
  turn comes among all the chats waiting, finals first. The caller names the calls the action
  makes (``draws``, from the chat's transport: a Slack stream's append draws on
  ``chat.appendStream``'s budget, not ``chat.update``'s); by default the call's own kind.

The bucket holds ``burst`` tokens, one by default: with a full bucket of ``capacity`` tokens a
window could see the burst plus a window's refill, twice the budget.

The platform counts a call when it arrives, somewhere between its send and its answer; Iris
knows only those two. So a call's slot is counted twice, and the stricter wins: from its send,
over the budget's window widened by its ``margin`` (the bucket refills at ``capacity / (per +
margin)``), and from its answer (``answered``), over the platform's own window (a second bucket,
charged when the answer comes). A chat makes one call at a time, so a call sent one interval
after the last one's answer can never arrive closer than an interval to it, however slow that
one was; the margin covers a fast call whose answer came back at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from iris.surfaces.chat.budget import Draws, Priority, RateBudget, Seat

CallKind = Literal["send", "edit"]

# After this many 429s in a row the edit interval stops doubling (2**3 = 8x).
_MAX_DOUBLINGS = 3


@dataclass
class Throttle:
    budget: RateBudget
    edit_interval: float
    burst: int = 1
    seat: Seat | None = None  # this chat's place at the bot's shared budget
    tokens: float = field(init=False)
    stamp: float = field(default=float("-inf"), init=False)
    blocked_until: float = field(default=float("-inf"), init=False)
    last_update: float = field(default=float("-inf"), init=False)
    strikes: int = field(default=0, init=False)  # 429s since the last success
    # The same bucket charged when each call's answer came back, refilled at the platform's rate.
    answer_tokens: float = field(init=False)
    answer_stamp: float = field(default=float("-inf"), init=False)

    def __post_init__(self) -> None:
        if self.budget.capacity < 1 or self.budget.per_seconds <= 0 or self.budget.margin < 0:
            raise ValueError(f"invalid rate budget: {self.budget}")
        self.tokens = self.answer_tokens = float(self.burst)

    @property
    def _rate(self) -> float:
        return 1.0 / self.budget.spacing

    def _level(self, now: float) -> float:
        if self.stamp == float("-inf"):
            return self.tokens
        return min(float(self.burst), self.tokens + (now - self.stamp) * self._rate)

    def _answer_level(self, now: float) -> float:
        if self.answer_stamp == float("-inf"):
            return self.answer_tokens
        elapsed = now - self.answer_stamp
        return min(float(self.burst), self.answer_tokens + elapsed / self.budget.interval)

    @property
    def interval(self) -> float:
        """The current edit interval: doubled per 429 in a row, so edit cycles are skipped."""
        return self.edit_interval * 2 ** min(self.strikes, _MAX_DOUBLINGS)

    def ready_at(
        self,
        kind: CallKind,
        now: float,
        priority: Priority = "preview",
        draws: Draws | None = None,
        *,
        early: bool = False,
    ) -> float:
        """The earliest time (>= now) a call of ``kind`` may go out (making ``draws``).

        Only a chat its own rules allow now waits in the shared budget's line: one that must
        wait anyway leaves its place to the others until then."""
        level = self._level(now)
        # The epsilon keeps float refill arithmetic from landing a hair short of a token.
        at = now if level >= 1 - 1e-9 else now + (1 - level) / self._rate
        answered = self._answer_level(now)
        if answered < 1 - 1e-9:
            at = max(at, now + (1 - answered) * self.budget.interval)
        at = max(at, self.blocked_until)
        if kind == "edit" and not (early and self.strikes == 0):
            at = max(at, self.last_update + self.interval)
        if self.seat is not None:
            if at > now:
                self.seat.withdraw()
            else:
                at = self.seat.ready_at(kind if draws is None else draws, priority, now)
        return at

    def spend(self, kind: CallKind, now: float, draws: Draws | None = None) -> None:
        """Record a call going out now (the caller checked ``ready_at``)."""
        if self.seat is not None:
            self.seat.spend(kind if draws is None else draws, now)
        self.tokens = self._level(now) - 1
        self.stamp = now
        self.last_update = now

    def answered(self, now: float) -> None:
        """The platform answered the last call now (or it failed, or timed out): its slot also
        counts from here."""
        self.answer_tokens = self._answer_level(now) - 1
        self.answer_stamp = now

    def withdraw(self) -> None:
        """Nothing more to send for now: give up this chat's place in the shared line."""
        if self.seat is not None:
            self.seat.withdraw()

    def succeeded(self) -> None:
        self.strikes = 0

    def rate_limited(self, retry_after: float, now: float) -> None:
        """The platform answered 429: honour ``retry_after`` and back off."""
        self.strikes += 1
        self.blocked_until = max(self.blocked_until, now + max(retry_after, 0.0))
        self.tokens = min(self._level(now), 0.0)
        self.stamp = now

"""A bot's shared call budgets, drawn on by every chat of that bot, fairly. Pure: callers pass ``now``.

A platform limits more than one chat at a time: Telegram about 30 messages a second per bot,
Discord 50 requests a second per bot, Slack each Web API method per workspace. A
``SharedBudget`` (one per platform adapter) holds one pacer per such limit and names which
limits each kind of call draws on (``draws``). Each chat's ``Throttle`` holds a ``Seat`` and
asks it before a call; the budget decides which of the chats waiting goes next:

- by priority: a final delivery (the chat's turn is over) before a chat's first visible text,
  before a preview edit;
- within a priority, previews take turns: the chat served longest ago goes first (round robin),
  so when the budget is short every chat's preview slows down alike; finals and first texts
  go in the order they asked;
- a chat's claim holds its place in line until it spends, withdraws, or fails to come back
  within ``STALE`` seconds of the time it was given (a chat whose turn ended abruptly never
  blocks the others for long);
- a chat the platform said is spent (``hold``: Discord's per-route bucket of its channel, from
  the ``X-RateLimit-*`` headers) waits until then out of the line.

A call is named by its kind (``CallKind``); the adapter's ``draws`` says which limits each kind
draws on, so a platform that limits each method on its own (Slack) gives each method's kind its
own limit. One planned action may make more than one call (a Slack stream left for edits is
stopped, then updated): it asks with all their kinds (``Draws``) and draws on each.

A seat is named by ``scope(chat_id, thread)``: what the platform limits separately (Discord:
the channel a call goes to, a thread being a channel of its own; Telegram and Slack: the chat,
its threads included, ``whole_chat``).

Each limit is paced as a token bucket of one token (the generic cell rate): two calls are never
closer than ``(per_seconds + margin) / capacity``, so no window of ``per_seconds + margin``
sees more than ``capacity`` calls, whatever the chats do. The platform counts a call when it
arrives: the margin covers calls that took longer to get there than those after them. (A
chat's own budget also counts each call from its answer: ``throttle.Throttle``. A shared
limit does not: its calls overlap, and holding each slot until its answer cut forty chats'
calls by a quarter on a busy machine and still drew 429s from calls in flight longer than
the window; the defaults' room under each platform's figure absorbs the overlap.)

A limit the platform documents as tolerating bursts (``Limit.burst``: Slack's per-minute tiers)
counts its calls in the sliding window instead: a final delivery or a first visible text goes
as soon as the last ``per_seconds`` hold fewer than ``capacity`` calls (those ahead in line
included), so forty chats can open their replies at once; previews stay paced one per
``per_seconds / capacity`` and also wait for room in the window, so no window sees more than
``capacity`` calls either way.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from iris.config import BUDGET_MARGIN, Rate

Priority = Literal["final", "first", "preview"]
# What a call does, as the adapter's ``draws`` knows it: a new message, an edit, a typing
# indicator, or a step of a native stream (Slack ``chat.startStream`` / ``appendStream`` /
# ``stopStream``).
CallKind = Literal[
    "send", "edit", "delete", "typing", "stream_start", "stream_append", "stream_stop"
]
# The calls one planned action makes, in order (none: it makes no call the budget knows).
Draws = tuple[CallKind, ...]

_ORDER: dict[Priority, int] = {"final": 0, "first": 1, "preview": 2}
# A claim not renewed this long after its given time is dropped (its chat went away).
STALE = 1.0
_HOLDS_KEPT = 1024  # past this many held seats, the expired holds are forgotten
# A kind an adapter's ``draws`` does not name draws like the kind it stands for: a delete like
# a send (as it did before deletes had a kind of their own).
_STANDS_FOR: dict[CallKind, CallKind] = {"delete": "send"}

Scope = Callable[[str, Mapping[str, str]], str]


def chat_scope(chat_id: str, thread: Mapping[str, str]) -> str:
    """A seat per chat, and per thread within it."""
    return ":".join([chat_id, *(thread[key] for key in sorted(thread))])


def whole_chat(chat_id: str, thread: Mapping[str, str]) -> str:
    """A seat per chat, its threads included: where the platform limits the chat as a whole
    (a Telegram group's topics, a Slack channel's threads)."""
    return chat_id


def kinds(draws: CallKind | Draws) -> Draws:
    """One kind or several, as a tuple."""
    return draws if isinstance(draws, tuple) else (draws,)


@dataclass(frozen=True, slots=True)
class RateBudget:
    """A platform's budget: at most ``capacity`` calls in any ``per_seconds`` window.

    Per chat/channel, sends and edits share it (``throttle.Throttle`` enforces it as a token
    bucket refilled evenly at ``capacity / (per_seconds + margin)``); a bot-wide one is a
    ``budget.Limit``. ``margin`` widens the window Iris paces by: the platform counts calls
    when they arrive, and a call can take longer to arrive than the one after it."""

    capacity: int
    per_seconds: float
    margin: float = BUDGET_MARGIN

    @property
    def window(self) -> float:
        """The window Iris counts calls in: the platform's, plus the margin."""
        return self.per_seconds + self.margin

    @property
    def spacing(self) -> float:
        """Seconds between two calls sent at the budget's pace (margin included)."""
        return self.window / self.capacity

    @property
    def interval(self) -> float:
        """Seconds between two calls as the platform counts them (no margin)."""
        return self.per_seconds / self.capacity


def rate_budget(rate: Rate) -> RateBudget:
    """A configured rate (``platforms.<p>.budgets.<name>``) as the budget type."""
    return RateBudget(rate.calls, rate.per, rate.margin)


@dataclass(frozen=True, slots=True)
class Limit:
    """One shared limit: at most ``rate.capacity`` calls in any ``rate.per_seconds`` window."""

    name: str  # "bot", "global", "chat.update"
    rate: RateBudget
    burst: bool = False  # finals and first texts may use the window's room at once

    @property
    def spacing(self) -> float:
        return self.rate.spacing


@dataclass
class Seat:
    """One chat's place at a shared budget (held by its ``Throttle``)."""

    budget: SharedBudget
    key: str
    served: float = float("-inf")  # when this chat last spent: round robin among previews

    def ready_at(self, kind: CallKind | Draws, priority: Priority, now: float) -> float:
        return self.budget.ready_at(self, kind, priority, now)

    def spend(self, kind: CallKind | Draws, now: float) -> None:
        self.budget.spend(self, kind, now)

    def withdraw(self) -> None:
        self.budget.withdraw(self)


@dataclass
class _Claim:
    seat: Seat
    names: frozenset[str]  # the limits it draws on
    priority: Priority
    asked: float  # when this claim was first made: first come, first served within a priority
    until: float  # the time last given to it, plus STALE

    def order(self) -> tuple[int, float, float, str]:
        served = self.seat.served if self.priority == "preview" else float("-inf")
        return (_ORDER[self.priority], served, self.asked, self.seat.key)


@dataclass
class SharedBudget:
    """The shared limits of one bot, and the chats waiting on them."""

    limits: Sequence[Limit] = ()
    # Which limits each kind of call draws on (by name); a kind not listed draws on none.
    draws: Mapping[CallKind, Sequence[str]] = field(default_factory=dict[CallKind, Sequence[str]])
    scope: Scope = chat_scope
    _holds: dict[str, float] = field(default_factory=dict[str, float], init=False)
    _free_at: dict[str, float] = field(default_factory=dict[str, float], init=False)
    _claims: dict[str, _Claim] = field(default_factory=dict[str, _Claim], init=False)
    # Burst limits: the calls of the last window, and how long a platform 429 holds them.
    _window: dict[str, deque[float]] = field(default_factory=dict[str, deque[float]], init=False)
    _blocked: dict[str, float] = field(default_factory=dict[str, float], init=False)
    calls: int = field(default=0, init=False)  # calls spent against the budget, for figures

    def __post_init__(self) -> None:
        names = {limit.name for limit in self.limits}
        for limit in self.limits:
            rate = limit.rate
            if rate.capacity < 1 or rate.per_seconds <= 0 or rate.margin < 0:
                raise ValueError(f"invalid rate budget for {limit.name}: {limit.rate}")
        for kind, drawn in self.draws.items():
            if unknown := set(drawn) - names:
                raise ValueError(f"{kind} draws on unknown limits: {sorted(unknown)}")
        self._free_at = {limit.name: float("-inf") for limit in self.limits}
        self._window = {limit.name: deque[float]() for limit in self.limits if limit.burst}
        self._blocked = {limit.name: float("-inf") for limit in self.limits}

    def seat(self, chat_id: str, thread: Mapping[str, str] | None = None) -> Seat:
        return Seat(self, self.scope(chat_id, thread or {}))

    def _drawn(self, kind: CallKind) -> Sequence[str]:
        if kind in self.draws:
            return self.draws[kind]
        stands_for = _STANDS_FOR.get(kind)
        return () if stands_for is None else self.draws.get(stands_for, ())

    def _limits(self, kind: CallKind | Draws) -> list[Limit]:
        drawn = {name for k in kinds(kind) for name in self._drawn(k)}
        return [limit for limit in self.limits if limit.name in drawn]

    def ready_at(self, seat: Seat, kind: CallKind | Draws, priority: Priority, now: float) -> float:
        """The earliest time (>= now) ``seat`` may make the call(s) of ``kind``; holds its
        place."""
        held = self._holds.get(seat.key, float("-inf"))
        if held > now:
            self.withdraw(seat)  # it waits anyway: its place goes to the others until then
            return held
        limits = self._limits(kind)
        if not limits:
            return now
        names = frozenset(limit.name for limit in limits)
        claim = self._claims.get(seat.key)
        if claim is None or claim.seat is not seat:
            claim = _Claim(seat, names, priority, asked=now, until=now)
            self._claims[seat.key] = claim
        else:
            claim.names, claim.priority = names, priority
        mine = claim.order()
        at = now
        for limit in limits:
            ahead = sum(
                1
                for other in self._claims.values()
                if other is not claim
                and other.until >= now
                and limit.name in other.names
                and other.order() < mine
            )
            at = max(at, self._limit_at(limit, ahead, priority, now))
        claim.until = at + STALE
        return at

    def _limit_at(self, limit: Limit, ahead: int, priority: Priority, now: float) -> float:
        """When a call with ``ahead`` calls before it in line may go, by ``limit``."""
        paced = max(self._free_at[limit.name], now) + ahead * limit.spacing
        if not limit.burst:
            return paced
        window = self._recent(limit, now)
        # The window has room for this call once enough of its calls are older than a window.
        over = len(window) + ahead - limit.rate.capacity
        if over < 0:
            room = now
        elif over < len(window):
            room = window[over] + limit.rate.window
        else:  # those ahead fill a whole window: after theirs, at the latest
            room = now + limit.rate.window
        room = max(room, self._blocked[limit.name])
        return room if priority != "preview" else max(room, paced)

    def _recent(self, limit: Limit, now: float) -> deque[float]:
        """The calls of ``limit`` in the window (margin included) ending now (a burst
        limit's)."""
        window = self._window[limit.name]
        while window and window[0] <= now - limit.rate.window:
            window.popleft()
        return window

    def _spent(self, limit: Limit, now: float, *, paced: bool) -> None:
        if limit.burst:
            self._recent(limit, now).append(now)
        if paced:
            self._free_at[limit.name] = max(self._free_at[limit.name], now) + limit.spacing

    def spend(self, seat: Seat, kind: CallKind | Draws, now: float) -> None:
        """Record the call(s) of ``kind`` going out now (the caller checked ``ready_at``)."""
        limits = self._limits(kind)
        claim = self._claims.get(seat.key)
        # A burst call is counted by its window only: the previews' pace is not pushed back.
        burst = claim is not None and claim.seat is seat and claim.priority != "preview"
        for limit in limits:
            self._spent(limit, now, paced=not (limit.burst and burst))
        if limits:
            self.calls += sum(1 for k in kinds(kind) if self._drawn(k))
            seat.served = now
        self.withdraw(seat)

    def spare(self, kind: CallKind, now: float) -> bool:
        """Take a call of ``kind`` only when no chat waits for it and it fits now.

        For calls that are a courtesy (a typing indicator): they never delay a reply."""
        limits = self._limits(kind)
        if any(self._limit_at(limit, 0, "preview", now) > now for limit in limits):
            return False
        names = {limit.name for limit in limits}
        for claim in self._claims.values():
            if claim.until >= now and names & claim.names:
                return False
        for limit in limits:
            self._spent(limit, now, paced=True)
        if limits:
            self.calls += 1
        return True

    def withdraw(self, seat: Seat) -> None:
        """``seat`` no longer waits (it spent, or has nothing to send)."""
        claim = self._claims.get(seat.key)
        if claim is not None and claim.seat is seat:
            del self._claims[seat.key]

    def hold(self, key: str, until: float, now: float) -> None:
        """The platform said seat ``key`` may not call before ``until`` (a dry bucket)."""
        if len(self._holds) >= _HOLDS_KEPT:
            self._holds = {k: t for k, t in self._holds.items() if t > now}
        self._holds[key] = max(self._holds.get(key, float("-inf")), until)

    def block(self, until: float, name: str | None = None) -> None:
        """The platform said a shared limit is spent (a global 429): nothing before ``until``."""
        for limit in self.limits:
            if name is None or limit.name == name:
                self._free_at[limit.name] = max(self._free_at[limit.name], until)
                self._blocked[limit.name] = max(self._blocked[limit.name], until)

    def waiting(self, now: float) -> int:
        """How many chats wait for a call now."""
        return sum(1 for claim in self._claims.values() if claim.until >= now)

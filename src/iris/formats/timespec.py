"""When a schedule runs, from what a person typed (pure: no clock, no I/O).

Two grammars, one per command:

- ``/remind <when> <text>``: ``in 20m`` (``s``, ``m``, ``h``, ``d``, also ``20 minutes``,
  ``1h30m``), ``at 18:30`` (today, or tomorrow when that passed), ``tomorrow 9:00`` (or
  ``tomorrow at 9:00``), ``2026-12-24 18:00``. ``when`` reads these as an instant.
- ``/every <cron or phrase> <prompt>``: a 5-field cron expression (``0 8 * * 1-5``) or a
  phrase that becomes one: ``day 08:00``, ``weekday 08:00``, ``monday 9:00``, ``hour``,
  ``15m``, ``2h`` (an optional leading ``every`` is read over). ``rule`` reads these.

A rule runs on the wall clock of a time zone (``next_after``): ``0 8 * * *`` is 08:00 there,
summer and winter. Across a DST change a local time that does not exist (02:30 on the spring
night in Berlin) runs at the same distance after the change (03:30); one that exists twice
(02:30 on the autumn night) runs once, the first time. That is what cron does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

__all__ = ["Cron", "TimeSpecError", "next_after", "rule", "shortest_gap", "when"]

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_FULL_DAYS = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_UNIT_WORDS = {
    "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "min": "m", "mins": "m", "minute": "m", "minutes": "m",
    "hour": "h", "hours": "h", "hr": "h", "hrs": "h",
    "day": "d", "days": "d",
}  # fmt: skip
_CLOCK = re.compile(r"^(\d{1,2})(?::(\d{2}))?$")
_FIELD = re.compile(r"^[\d*/,\-a-zA-Z]+$")
# How far a rule looks ahead for its next run before it says it has none (Feb 29 on a Monday
# comes round within 28 years).
_HORIZON_DAYS = 366 * 29


class TimeSpecError(ValueError):
    """What was typed is no time this grammar knows; the message says what would be."""


@dataclass(frozen=True, slots=True)
class Cron:
    """A 5-field cron expression: the sets of minutes, hours, days, months, weekdays."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # the day-of-month field is "*"
    any_weekday: bool  # the day-of-week field is "*"

    @classmethod
    def parse(cls, text: str) -> Cron:
        fields = text.split()
        if len(fields) != 5:
            raise TimeSpecError(f"a cron expression has 5 fields, not {len(fields)}: {text!r}")
        minute, hour, day, month, weekday = fields
        weekdays = {d % 7 for d in _field(weekday, 0, 7, _DAYS)}
        return cls(
            " ".join(fields),
            tuple(sorted(_field(minute, 0, 59))),
            tuple(sorted(_field(hour, 0, 23))),
            frozenset(_field(day, 1, 31)),
            frozenset(_field(month, 1, 12, _MONTHS, base=1)),
            frozenset(weekdays),
            day == "*",
            weekday == "*",
        )

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        by_day = day.day in self.days
        by_weekday = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:  # cron: both must hold unless one is "*"
            return by_day and by_weekday
        return by_day or by_weekday  # both restricted: either one

    def next_local(self, after: datetime) -> datetime | None:
        """The first wall-clock minute after ``after`` (naive) the expression names."""
        start = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
        day = start.date()
        for _ in range(_HORIZON_DAYS):
            if self.day_matches(day):
                for hour in self.hours:
                    for minute in self.minutes:
                        candidate = datetime.combine(day, time(hour, minute))
                        if candidate >= start:
                            return candidate
            day += timedelta(days=1)
        return None


def _field(
    text: str, low: int, high: int, names: list[str] | None = None, base: int = 0
) -> set[int]:
    """One cron field's values: ``*``, ``5``, ``1-5``, ``*/15``, ``1-30/2``, lists, names."""
    if not _FIELD.match(text):
        raise TimeSpecError(f"not a cron field: {text!r}")
    values: set[int] = set()
    for part in text.split(","):
        span, _, step_text = part.partition("/")
        step = _number(step_text, 1, high or 1) if step_text else 1
        if span == "*":
            first, last = low, high
        else:
            first_text, _, last_text = span.partition("-")
            first = _value(first_text, low, high, names, base)
            last = _value(last_text, low, high, names, base) if last_text else first
            if step_text and not last_text:
                last = high
        if first > last:
            raise TimeSpecError(f"a range runs low to high: {part!r}")
        values.update(range(first, last + 1, step))
    return values


def _value(text: str, low: int, high: int, names: list[str] | None, base: int) -> int:
    if names is not None and text.lower()[:3] in names and not text.isdigit():
        return names.index(text.lower()[:3]) + base
    return _number(text, low, high)


def _number(text: str, low: int, high: int) -> int:
    if not text.isdigit() or not low <= int(text) <= high:
        raise TimeSpecError(f"{text!r} is not a number from {low} to {high}")
    return int(text)


def next_after(cron: Cron, after: float, zone: ZoneInfo) -> float | None:
    """The first instant after ``after`` (epoch seconds) at which ``cron`` runs in ``zone``.

    Wall-clock minutes map to instants almost in order: around a DST change a skipped local
    time lands after the change and may come after a later local time, so every local
    candidate within a few hours of the first is converted and the earliest instant wins."""
    local = datetime.fromtimestamp(after, zone).replace(tzinfo=None) - timedelta(hours=3)
    best: float | None = None
    best_local: datetime | None = None
    while True:
        candidate = cron.next_local(local)
        if candidate is None or (best_local is not None and candidate > best_local + _SLACK):
            return best
        instant = candidate.replace(tzinfo=zone, fold=0).timestamp()
        if instant > after and (best is None or instant < best):
            best, best_local = instant, candidate
        local = candidate


_SLACK = timedelta(hours=3)  # more than any zone's DST shift


def shortest_gap(cron: Cron, after: float, zone: ZoneInfo, runs: int = 64) -> float:
    """The shortest time between two of the next ``runs`` runs (for ``min_interval_s``)."""
    gaps: list[float] = []
    last = next_after(cron, after, zone)
    for _ in range(runs):
        if last is None:
            break
        following = next_after(cron, last, zone)
        if following is not None:
            gaps.append(following - last)
        last = following
    return min(gaps, default=float("inf"))


def when(text: str, now: float, zone: ZoneInfo) -> tuple[float, str]:
    """The instant ``/remind``'s words name, and the rest of the line (the reminder)."""
    words = text.split()
    if not words:
        raise TimeSpecError(_REMIND_USAGE)
    head = words[0].lower()
    if head == "in":
        seconds, used = _duration(words[1:])
        return now + seconds, " ".join(words[1 + used :])
    today = datetime.fromtimestamp(now, zone).date()
    if head == "at" and len(words) > 1:
        clock = _clock(words[1])
        at = _instant(today, clock, zone)
        if at <= now:
            at = _instant(today + timedelta(days=1), clock, zone)
        return at, " ".join(words[2:])
    if head == "tomorrow" and len(words) > 1:
        rest = words[2:] if words[1].lower() == "at" else words[1:]
        if not rest:
            raise TimeSpecError(_REMIND_USAGE)
        return _instant(today + timedelta(days=1), _clock(rest[0]), zone), " ".join(rest[1:])
    if re.match(r"^\d{4}-\d{2}-\d{2}$", head) and len(words) > 1:
        try:
            day = date.fromisoformat(head)
        except ValueError as exc:
            raise TimeSpecError(f"no such date: {head}") from exc
        return _instant(day, _clock(words[1]), zone), " ".join(words[2:])
    raise TimeSpecError(_REMIND_USAGE)


_REMIND_USAGE = (
    "when? say `in 20m`, `at 18:30`, `tomorrow 9:00` or `2026-12-24 18:00`, then the text"
)
_EVERY_USAGE = (
    "how often? say `day 08:00`, `weekday 08:00`, `monday 9:00`, `hour`, `15m`, `2h` "
    "or a 5-field cron expression (`0 8 * * 1-5`), then the prompt"
)


def _duration(words: list[str]) -> tuple[float, int]:
    """Seconds of ``20m``, ``1h30m``, ``20 minutes``, ``2 h``; and how many words it took."""
    if not words:
        raise TimeSpecError(_REMIND_USAGE)
    compact = re.fullmatch(r"((?:\d+[smhd])+)", words[0].lower())
    if compact:
        parts = re.findall(r"(\d+)([smhd])", compact.group(1))
        return sum(int(n) * _UNITS[u] for n, u in parts), 1
    if words[0].isdigit() and len(words) > 1 and words[1].lower() in _UNIT_WORDS:
        return int(words[0]) * _UNITS[_UNIT_WORDS[words[1].lower()]], 2
    raise TimeSpecError(f"how long? say `in 20m`, `in 2h`, `in 1h30m`, not {words[0]!r}")


def _clock(text: str) -> time:
    match = _CLOCK.match(text)
    if match is None:
        raise TimeSpecError(f"a time of day is HH:MM, not {text!r}")
    hour, minute = int(match.group(1)), int(match.group(2) or 0)
    if hour > 23 or minute > 59:
        raise TimeSpecError(f"no such time of day: {text}")
    return time(hour, minute)


def _instant(day: date, clock: time, zone: ZoneInfo) -> float:
    return datetime.combine(day, clock).replace(tzinfo=zone, fold=0).timestamp()


def rule(text: str) -> tuple[Cron, str]:
    """The cron rule ``/every``'s words name, and the rest of the line (the prompt)."""
    words = text.split()
    if words and words[0].lower() == "every":
        words = words[1:]
    if len(words) > 2 and words[1].lower() == "at":  # "day at 08:00"
        words = [words[0], *words[2:]]
    if not words:
        raise TimeSpecError(_EVERY_USAGE)
    phrase = _phrase(words[0].lower(), words[1] if len(words) > 1 else "")
    if phrase is not None:
        expression, used = phrase
        return Cron.parse(expression), " ".join(words[used:])
    if len(words) < 5 or not all(_FIELD.match(w) for w in words[:5]):
        raise TimeSpecError(_EVERY_USAGE)
    return Cron.parse(" ".join(words[:5])), " ".join(words[5:])


def _phrase(head: str, following: str) -> tuple[str, int] | None:
    """The cron expression of a phrase, and how many words it took."""
    if head == "hour":
        return "0 * * * *", 1
    interval = re.fullmatch(r"(\d+)([mh])", head)
    if interval:
        n, unit = int(interval.group(1)), interval.group(2)
        if unit == "m" and 0 < n < 60 and 60 % n == 0:
            return f"*/{n} * * * *", 1
        if unit == "h" and 0 < n < 24 and 24 % n == 0:
            return f"0 */{n} * * *", 1
        raise TimeSpecError("an interval divides an hour (`15m`) or a day (`2h`); else use cron")
    days = {"day": "*", "weekday": "1-5", "weekend": "0,6"}
    days |= {name: str(i) for i, name in enumerate(_FULL_DAYS)}
    if head not in days:
        return None
    if not _CLOCK.match(following):
        return f"0 9 * * {days[head]}", 1  # no time given: 09:00
    clock = _clock(following)
    return f"{clock.minute} {clock.hour} * * {days[head]}", 2

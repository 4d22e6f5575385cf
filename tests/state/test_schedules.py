"""Scheduled runs on virtual time: every due run fires once, in order, across zones and DST.

The scheduler (``iris.surfaces.scheduler``) runs over the SQLite store with a clock the test
moves; what it fires is compared with an oracle that walks every wall-clock minute of each
stretch of time (between two ``/tz`` changes) and keeps those the cron expression names, each
mapped to its instant as cron does (a skipped local time runs just after the change, a
repeated one the first time).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iris.config import SchedulesConfig
from iris.formats.timespec import Cron, TimeSpecError, next_after, rule, shortest_gap, when
from iris.state.schedules import Schedule, SqliteSchedules
from iris.state.sqlite import Store
from iris.surfaces.scheduler import Delivery, Run, Scheduler

pytestmark = pytest.mark.timeout(120)

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]
# Starts close to DST changes (Berlin and New York in March and in autumn, Lord Howe's
# half-hour shift in April), and one plain week.
STARTS = [
    datetime(2026, 3, 28, 20, 0, tzinfo=ZoneInfo("UTC")),
    datetime(2026, 3, 7, 22, 0, tzinfo=ZoneInfo("UTC")),
    datetime(2026, 10, 24, 21, 0, tzinfo=ZoneInfo("UTC")),
    datetime(2026, 10, 31, 23, 0, tzinfo=ZoneInfo("UTC")),
    datetime(2026, 4, 4, 12, 0, tzinfo=ZoneInfo("UTC")),
    datetime(2026, 6, 10, 9, 0, tzinfo=ZoneInfo("UTC")),
]
CRONS = st.sampled_from(
    [
        "30 2 * * *",  # 02:30: skipped on the spring night, twice on the autumn one
        "0,30 * * * *",
        "*/20 1-3 * * *",
        "15 8 * * 1-5",
        "0 */2 * * *",
        "45 23 * * 0,6",
        "0 0 1 * *",
    ]
)


class Recorder:
    """A surface that delivers every run at once and records it."""

    run_targets = ("test",)

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.fired: list[tuple[str, float, float]] = []  # (schedule, due, delivered at)

    def ready(self, target: Mapping[str, Any]) -> bool:
        return True

    async def run(self, run: Run) -> Delivery:
        self.fired.append((run.schedule.id, run.schedule.next_at, self.clock[0]))
        return Delivery("delivered")


def occurrences(cron: Cron, after: float, until: float, zone: ZoneInfo) -> list[float]:
    """The instants in (after, until] ``cron`` names in ``zone``: every wall-clock minute of
    the stretch (and three hours either side, for DST shifts) checked one by one."""
    first = datetime.fromtimestamp(after, zone).replace(tzinfo=None, second=0, microsecond=0)
    last = datetime.fromtimestamp(until, zone).replace(tzinfo=None)
    minute, found = first - timedelta(hours=3), set[float]()
    while minute <= last + timedelta(hours=3):
        if (
            cron.day_matches(minute.date())
            and (minute.hour in cron.hours)
            and (minute.minute in cron.minutes)
        ):
            instant = minute.replace(tzinfo=zone, fold=0).timestamp()
            if after < instant <= until:
                found.add(instant)
        minute += timedelta(minutes=1)
    return sorted(found)


async def play(
    crons: list[str], start: datetime, zones: list[str], steps: list[tuple[int, int | None]]
) -> tuple[list[tuple[str, float, float]], dict[str, list[float]]]:
    """Run the scheduler through ``steps`` (minutes to move on, a zone to change to); what
    fired, and what the oracle says should have."""
    clock = [start.timestamp()]
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "iris.db")
        schedules = SqliteSchedules(store)
        recorder = Recorder(clock)
        scheduler = Scheduler(
            schedules, SchedulesConfig(), {"test": recorder}, clock=lambda: clock[0]
        )
        zone = zones[0]
        stretches: list[tuple[float, str]] = [(clock[0], zone)]  # (from, zone)
        for n, text in enumerate(crons):
            cron = Cron.parse(text)
            due = next_after(cron, clock[0], ZoneInfo(zone))
            assert due is not None
            target = {"surface": "test"}
            await schedules.add(Schedule(f"s{n}", "c", "u", target, "x", text, zone, due))
        try:
            for minutes, change in steps:
                clock[0] += minutes * 60 + 7
                while started := await scheduler.tick():
                    await asyncio.gather(*started)
                if change is not None:
                    zone = zones[change % len(zones)]
                    await schedules.set_zone("u", zone, clock[0])
                    stretches.append((clock[0], zone))
        finally:
            await scheduler.stop()
            store.close()
    bounds = [*(t for t, _ in stretches[1:]), clock[0]]
    expected = {
        f"s{n}": [
            at
            for (begin, name), end in zip(stretches, bounds, strict=True)
            for at in occurrences(Cron.parse(text), begin, end, ZoneInfo(name))
        ]
        for n, text in enumerate(crons)
    }
    return recorder.fired, expected


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    crons=st.lists(CRONS, min_size=1, max_size=3),
    start=st.sampled_from(STARTS),
    zones=st.lists(st.sampled_from(ZONES), min_size=1, max_size=3),
    steps=st.lists(
        st.tuples(st.integers(1, 600), st.none() | st.integers(0, 5)), min_size=1, max_size=12
    ),
)
def test_every_due_run_fires_once_in_order_across_zones_and_dst(
    crons: list[str], start: datetime, zones: list[str], steps: list[tuple[int, int | None]]
) -> None:
    fired, expected = asyncio.run(play(crons, start, zones, steps))
    for schedule, due_times in expected.items():
        got = [due for s, due, _ in fired if s == schedule]
        assert got == due_times  # each once, none lost, in order
    for _, due, delivered in fired:
        assert delivered >= due  # never early


def test_a_skipped_local_time_runs_just_after_the_change_and_a_repeated_one_once() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    cron = Cron.parse("30 2 * * *")
    spring = datetime(2026, 3, 28, 12, tzinfo=berlin).timestamp()
    first = next_after(cron, spring, berlin)
    assert first is not None
    assert datetime.fromtimestamp(first, berlin).strftime("%d %H:%M %Z") == "29 03:30 CEST"
    autumn = datetime(2026, 10, 24, 12, tzinfo=berlin).timestamp()
    runs = [next_after(cron, autumn, berlin)]
    runs.append(next_after(cron, runs[-1] or 0, berlin))
    shown = [datetime.fromtimestamp(r or 0, berlin).strftime("%d %H:%M %Z") for r in runs]
    assert shown == ["25 02:30 CEST", "26 02:30 CET"]


def test_what_people_type_reads_as_instants_and_rules() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    now = datetime(2026, 5, 4, 19, 0, tzinfo=berlin).timestamp()  # a Monday, 19:00
    assert when("in 20m call mom", now, berlin) == (now + 1200, "call mom")
    assert when("in 1h30m x", now, berlin)[0] == now + 5400
    assert when("in 2 hours x", now, berlin)[0] == now + 7200
    at, text = when("at 18:30 water the plants", now, berlin)  # passed: tomorrow
    assert datetime.fromtimestamp(at, berlin) == datetime(2026, 5, 5, 18, 30, tzinfo=berlin)
    assert text == "water the plants"
    at, _ = when("tomorrow 9:00 standup", now, berlin)
    assert datetime.fromtimestamp(at, berlin) == datetime(2026, 5, 5, 9, 0, tzinfo=berlin)
    assert rule("every day 08:00 summarise my inbox")[0].text == "0 8 * * *"
    assert rule("day at 08:00 x") == (Cron.parse("0 8 * * *"), "x")
    assert rule("weekday 7:45 news")[0].text == "45 7 * * 1-5"
    assert rule("0 8 * * mon-fri summarise")[1] == "summarise"
    assert rule("15m ping")[0].text == "*/15 * * * *"
    assert shortest_gap(rule("15m ping")[0], now, berlin) == 900


@pytest.mark.parametrize(
    ("words", "reads"),
    [
        ("tuesday-ish do it", rule),
        ("61 * * * * x", rule),
        ("7m x", rule),
        ("at 25:00 x", when),
        ("in soon x", when),
        ("", when),
    ],
)
def test_what_is_no_time_is_refused_with_what_would_be(words: str, reads: Any) -> None:
    with pytest.raises(TimeSpecError) as refused:
        reads(words) if reads is rule else reads(words, 0.0, ZoneInfo("UTC"))
    assert str(refused.value)


async def test_a_run_is_claimed_once_and_finished_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "iris.db")
    try:
        schedules = SqliteSchedules(store)
        s = Schedule("a1", "c", "u", {"surface": "test"}, "x", "", "UTC", 100.0)
        await schedules.add(s)
        claim = await schedules.claim(s, 10, 100.0)
        assert claim is not None and claim.schedule.attempts == 1
        assert await schedules.claim(s, 10, 101.0) is None  # held
        retry = await schedules.claim(s, 10, 111.0)  # the holder died: its claim ran out
        assert retry is not None and retry.schedule.attempts == 2
        assert not await schedules.finish(claim, None)  # the first holder lost it
        assert await schedules.finish(retry, None)
        assert await schedules.of_chat("c") == []
    finally:
        store.close()

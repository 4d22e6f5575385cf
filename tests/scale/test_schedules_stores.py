"""The schedules' and the push subscriptions' stores behave the same on SQLite and on Redis:
a run claimed once and finished once, a user's zone moving their rules, notes told once, a
browser's subscription per chat dropped by its id."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from iris.config import Config
from iris.runtime import Runtime
from iris.state.push import new_subscription, short
from iris.state.schedules import Schedule
from tests.scale.conftest import RedisServer

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=["sqlite", "redis"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    store: dict[str, str] = {"path": str(tmp_path / "iris.db")}
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        store["url"] = server.url
    config = Config.model_validate({"store": store, "model": {"name": "m", "base_url": "http://x"}})
    made = Runtime.create(config)
    assert (made.shared is not None) == (request.param == "redis")
    yield made
    if made.shared is not None:
        made.shared.close()
    made.store.close()


def daily(at: float, user: str = "telegram:7") -> Schedule:
    target = {"surface": "telegram", "chat_id": "42"}
    return Schedule("d1", "telegram:42", user, target, "news", "0 8 * * *", "UTC", at)


async def test_a_run_is_claimed_once_and_its_finish_moves_it_on(runtime: Runtime) -> None:
    schedules = runtime.schedules
    assert schedules is not None
    due = datetime(2026, 5, 4, 8, 0, tzinfo=ZoneInfo("UTC")).timestamp()
    await schedules.add(daily(due))
    (found,) = await schedules.due(due + 1)
    first = await schedules.claim(found, 5, due + 1)
    assert first is not None and first.schedule.attempts == 1
    assert await schedules.claim(found, 5, due + 1) is None  # held: nobody else runs it
    assert await schedules.finish(first, due + 86400)
    assert await schedules.due(due + 2) == []
    assert await schedules.claim(found, 5, due + 2) is None  # that run is done
    (moved,) = await schedules.of_chat("telegram:42")
    assert moved.next_at == due + 86400 and moved.attempts == 0
    assert await schedules.count_user("telegram:7") == 1


async def test_a_new_zone_moves_the_users_rules_to_its_wall_clock(runtime: Runtime) -> None:
    schedules = runtime.schedules
    assert schedules is not None
    now = datetime(2026, 5, 4, 12, 0, tzinfo=ZoneInfo("UTC")).timestamp()
    await schedules.add(daily(now + 3600 * 20))
    assert await schedules.zone("telegram:7") is None
    assert await schedules.set_zone("telegram:7", "Europe/Berlin", now) == 1
    assert await schedules.zone("telegram:7") == "Europe/Berlin"
    (moved,) = await schedules.of_chat("telegram:42")
    berlin = datetime.fromtimestamp(moved.next_at, ZoneInfo("Europe/Berlin"))
    assert (berlin.day, berlin.hour, berlin.minute, moved.zone) == (5, 8, 0, "Europe/Berlin")
    assert await schedules.remove("telegram:42", "d1")
    assert not await schedules.remove("telegram:42", "d1")


async def test_notes_are_told_once(runtime: Runtime) -> None:
    schedules = runtime.schedules
    assert schedules is not None
    await schedules.note("telegram:42", "first")
    await schedules.note("telegram:42", "second")
    assert await schedules.notes("telegram:42") == ["first", "second"]
    assert await schedules.notes("telegram:42") == []


async def test_a_browser_subscribes_per_chat_and_is_dropped_by_its_id(runtime: Runtime) -> None:
    push = runtime.push
    assert push is not None
    info = {
        "endpoint": "https://push.example/send/abcdef123456",
        "keys": {"p256dh": "k", "auth": "a"},
    }
    for chat in ("a", "b", "a"):  # a second "a" replaces the first
        await push.add(new_subscription(chat, "phone", info))
    assert [s.chat for s in await push.listed()] == ["b", "a"]
    (one,) = await push.of_chat("a")
    assert one.subscription == info and one.device == "phone"
    assert await push.remove(short(one))
    assert await push.listed() == []
    assert not await push.remove("nothing")

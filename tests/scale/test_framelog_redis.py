"""The frame log on a Redis Stream and the tailer, against a real redis-server: seqs shared by
processes, one snapshot per live message, the floor and ``sync``, the transcript, open messages
and turns, the fence; and two hubs (two processes' worth) delivering one order."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iris.errors import StoreUnavailable
from iris.fanout import tailer as tailer_module
from iris.fanout.hub import Hub
from iris.fanout.redis_log import PRUNE_EVERY, RedisFrameLog
from iris.protocol.types import RULES
from iris.state.lease import LeaseLost
from iris.state.redis_store import RedisStore
from tests.scale.conftest import RedisServer
from tests.scale.framelog_plans import check_two_hubs, plans, redis_log, tailing, typing, until_seq
from tests.socket.fanout_plans import check_plan, drain, ops, reply, seqs, update

Make = Callable[..., Hub]


@pytest.fixture
def make(redis_server: RedisServer) -> Iterator[Make]:
    """``make(**log_options)``: a hub on its own ``RedisStore`` (as another process would be)."""
    stores: list[RedisStore] = []

    def hub(*, queue_size: int = 256, **options: Any) -> Hub:
        store = RedisStore(redis_server.url, timeout=1.0)
        stores.append(store)
        return Hub(RedisFrameLog(store, rules=RULES, **options), queue_size=queue_size)

    yield hub
    for store in stores:
        store.close()


# -- the log --------------------------------------------------------------------------------------


async def test_two_processes_share_one_seq_per_chat(make: Make) -> None:
    a, b = make(), make()
    assert [a.publish("c", typing(True))["seq"] for _ in range(3)] == [1, 2, 3]
    assert b.publish("c", typing(False))["seq"] == 4
    assert a.publish("c", typing(True))["seq"] == 5
    assert b.publish("other", typing(True))["seq"] == 1
    assert make().latest("c") == 5 and seqs(a.log.after("c", 0, 100)) == [1, 2, 3, 4, 5]


async def test_a_live_message_keeps_one_snapshot_and_none_once_closed(make: Make) -> None:
    hub = make()
    hub.publish("c", {"type": "message.start", "message_id": "m1", "role": "assistant"})
    for n in range(1, 50):
        hub.publish("c", update("m1", "x" * n))
    mid_reply = hub.log.after("c", 0, 100)
    assert [f["type"] for f in mid_reply] == ["message.start", "message.update"]
    assert mid_reply[1]["text"] == "x" * 49 and mid_reply[1]["seq"] == 50
    assert hub.log.open_messages("c") == {"m1": "x" * 49}
    hub.publish("c", {"type": "message.stop", "message_id": "m1", "final_text": "done"})
    assert [f["type"] for f in hub.log.after("c", 0, 100)] == ["message.start", "message.stop"]
    assert hub.log.open_messages("c") == {}
    assert hub.log.messages("c") == [{"message_id": "m1", "role": "assistant", "text": "done"}]


async def test_open_messages_oldest_first_and_turns_open_on_any_process(make: Make) -> None:
    a, b = make(), make()
    a.publish("c", typing(True))
    a.publish("c", {"type": "message.start", "message_id": "m2", "role": "assistant"})
    b.publish("c", {"type": "message.start", "message_id": "m1", "role": "assistant"})
    b.publish("c", update("m1", "one"))
    assert a.log.open_messages("c") == {"m2": "", "m1": "one"}
    conversation = a.log.messages("c")
    assert [m["message_id"] for m in conversation] == ["m2", "m1"]
    assert b.log.turn_open("c") and await b.log.open_turns() == ["c"]
    a.publish("c", typing(False))
    assert not b.log.turn_open("c") and await b.log.open_turns() == []


async def test_resume_below_the_floor_gets_a_sync_and_the_floor_ignores_dropped_snapshots(
    make: Make,
) -> None:
    hub = make(max_frames=11)
    hub.publish("c", {"type": "message", "message_id": "u1", "role": "user", "text": "hi"})
    for n in range(1, 30):
        reply(hub, "c", f"m{n}", f"answer {n}")  # start, 3 updates (dropped at the stop), stop
    hub.publish("c", {"type": "message.start", "message_id": "live", "role": "assistant"})
    hub.publish("c", update("live", "still typ"))
    hub.log.prune("c")
    kept = hub.log.after("c", 0, 100)
    assert len(kept) == 11 and kept[-1]["text"] == "still typ"
    # The oldest frame kept closes a message whose updates were XDEL'd: the floor is its
    # start (the newest frame trimmed), not the seq before it (the updates were never lost).
    assert kept[0]["type"] == "message.stop"
    floor = hub.log.floor("c")
    assert floor == kept[0]["seq"] - 4
    sub = hub.subscribe("c")
    sub.resume(1)
    got = await drain(sub)
    assert [f["type"] for f in got] == ["sync"]
    messages = got[0]["messages"]
    assert messages[0] == {"message_id": "u1", "role": "user", "text": "hi"}
    assert messages[-1] == {"message_id": "live", "role": "assistant", "text": "still typ"}
    sub.resume(floor + 3)  # within reach: frame by frame again
    assert seqs(await drain(sub)) == seqs(kept)


async def test_bounds_apply_every_so_many_appends_by_count_and_by_age(make: Make) -> None:
    now = [1000.0]
    hub = make(max_frames=10_000, max_age=60.0, clock=lambda: now[0])
    for _ in range(5):
        hub.publish("c", typing(True))
    now[0] += 61
    for _ in range(PRUNE_EVERY - 5):  # the 64th append checks the bounds
        hub.publish("c", typing(False))
    assert hub.log.floor("c") == 5 and hub.log.after("c", 0, 1)[0]["seq"] == 6
    assert make().latest("c") == PRUNE_EVERY


async def test_a_fenced_chat_takes_nothing_once_the_lease_is_someone_elses(
    make: Make, redis_server: RedisServer
) -> None:
    hub, client = make(), redis_server.client()
    client.set("lease:c", "mine")
    hub.fence("c", "lease:c", "mine")
    assert hub.publish("c", typing(True))["seq"] == 1
    client.set("lease:c", "theirs")
    with pytest.raises(LeaseLost):
        hub.publish("c", typing(False))
    client.delete("lease:c")
    with pytest.raises(LeaseLost):
        hub.publish("c", typing(False))
    assert hub.log.last_seq("c") == 1 and seqs(hub.log.after("c", 0, 10)) == [1]
    assert hub.log.turn_open("c")  # the refused typing-off changed nothing
    hub.unfence("c")
    assert hub.publish("c", typing(False))["seq"] == 2
    client.close()


async def test_a_lost_redis_is_store_unavailable_and_service_resumes(
    make: Make, redis_server: RedisServer
) -> None:
    hub = make()
    hub.publish("c", typing(True))
    redis_server.stop()
    with pytest.raises(StoreUnavailable):
        hub.publish("c", typing(False))
    with pytest.raises(StoreUnavailable):
        hub.log.after("c", 0, 10)
    hub.log.prune("c")  # housekeeping: logged, not raised
    redis_server.start()  # AOF: what was acknowledged is back
    assert hub.publish("c", typing(False))["seq"] == 2


async def test_the_first_read_after_redis_restarts_is_served(
    make: Make, redis_server: RedisServer
) -> None:
    """A device's resume right after Redis came back reads the log on the first try (the
    pooled connection to the old server is replaced, not reported as a failure)."""
    hub = make()
    hub.publish("c", typing(True))
    assert hub.log.last_seq("c") == 1  # the pool now holds a connection to this server
    redis_server.stop()
    redis_server.start()
    assert [f["seq"] for f in hub.log.after("c", 0, 10)] == [1]


# -- the tailer -----------------------------------------------------------------------------------


async def test_frames_another_process_appends_reach_the_devices_here(make: Make) -> None:
    here, there = make(), make()
    async with tailing(here):
        sub = here.subscribe("c")
        reply(there, "c", "m1", "hello")
        got = await until_seq(sub, 5)
        assert [f["type"] for f in got if f["type"] != "message.update"] == [
            "message.start",
            "message.stop",
        ]
        here.publish("c", typing(False))  # and its own, after them
        assert seqs(await until_seq(sub, 6)) == [6]


async def test_a_device_ahead_of_this_process_resumes_once_and_in_order(make: Make) -> None:
    here, there = make(), make()
    async with tailing(here):
        here.subscribe("c")  # the chat is followed here from seq 0
        for n in range(5):  # and moves on elsewhere before the tailer has run
            there.publish("c", {"type": "tool.progress", "index": 1, "name": "t", "note": str(n)})
        back = here.subscribe("c")
        back.resume(2)  # seen on the other process: past what was delivered here
        there.publish("c", typing(True))
        assert seqs(await until_seq(back, 6)) == [3, 4, 5, 6]
        assert seqs(await drain(back)) == []  # the tailer's copies of 3..5 are not sent again


async def test_a_chat_joins_without_waiting_for_a_blocked_read(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tailer_module, "BLOCK", 600.0)  # a read waits far past the hang guard
    here, there = make(), make()
    async with tailing(here):
        first = here.subscribe("first")
        there.publish("first", typing(True))
        await until_seq(first, 1)  # the tailer is now blocked in a read without "later"
        later = here.subscribe("later")
        there.publish("later", typing(True))
        assert seqs(await until_seq(later, 1)) == [1]


async def test_the_tailer_resumes_from_its_positions_when_redis_returns(
    make: Make, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    here, there = make(), make()
    async with tailing(here):
        sub = here.subscribe("c")
        there.publish("c", typing(True))
        await until_seq(sub, 1)
        redis_server.stop()
        await asyncio.sleep(0.3)  # let the tailer find the store gone and back off
        redis_server.start()
        for _ in range(3):
            there.publish("c", typing(False))
        assert seqs(await until_seq(sub, 4)) == [2, 3, 4]
    lost = [r for r in caplog.records if "lost the store" in r.getMessage()]
    assert len(lost) == 1


# -- a property: two processes publishing at once, one order everywhere ---------------------------


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plans)
def test_two_hubs_deliver_one_order_with_no_gap_or_duplicate(
    redis_server: RedisServer, plan: list[tuple[str, str]]
) -> None:
    asyncio.run(check_two_hubs(redis_server.url, plan))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops, st.integers(2, 8))
def test_a_device_gets_every_frame_that_matters_once_in_order_from_redis(
    redis_server: RedisServer, plan: list[tuple[Any, ...]], capacity: int
) -> None:
    """tests/socket/test_fanout.py's property (a slow device, resumes, catch-ups) on the Redis
    log: a fresh prefix per example is a fresh store."""
    store = RedisStore(redis_server.url, prefix=uuid.uuid4().hex)
    try:
        hub = Hub(RedisFrameLog(store, rules=RULES), queue_size=capacity)
        asyncio.run(check_plan(plan, capacity, hub))
    finally:
        store.close()


async def test_the_epoch_key_expires_with_the_chat(make: Make) -> None:
    """The per-chat ``:epoch`` key lives as long as the chat's other keys: one made by a read
    (a device naming a chat id that never gets a frame) expires with the age bound instead of
    staying forever; once the chat has a log it has the log's expiry (none, or the log's)."""
    hub = make(max_age=600)
    log = redis_log(hub)
    sync = log.store.sync
    assert log.epoch("never-written")
    assert 0 < int(sync.ttl(log.key("never-written", "epoch"))) <= 600
    epoch = log.epoch("c")
    hub.publish("c", typing(True))
    assert log.epoch("c") == epoch  # the same epoch, now kept as the log is
    assert sync.ttl(log.key("c", "epoch")) == sync.ttl(log.key("c", "log")) == -1
    sync.expire(log.key("c", "log"), 300)  # a log given an expiry: the epoch follows it
    hub.publish("c", typing(False))
    assert 0 < int(sync.ttl(log.key("c", "epoch"))) <= 300

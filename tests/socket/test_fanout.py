"""The hub, the per-device queue and the SQLite frame log, without a server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iris.fanout.framelog import SqliteFrameLog
from iris.fanout.hub import Hub
from iris.fanout.rules import PLAIN, Frame, Traits
from iris.fanout.subscription import TooSlow, encode_frame
from iris.protocol.types import RULES
from iris.state.sqlite import Store
from tests.socket.fanout_plans import check_plan, drain, ops, reply, seqs, update


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "iris.db")


def hub_on(store: Store, *, queue_size: int = 256, **log: Any) -> Hub:
    return Hub(SqliteFrameLog(store, rules=RULES, **log), queue_size=queue_size)


async def test_seq_is_monotonic_per_chat_and_survives_a_restart(store: Store) -> None:
    hub = hub_on(store)
    assert [hub.publish("a", {"type": "typing", "on": True})["seq"] for _ in range(3)] == [1, 2, 3]
    assert hub.publish("b", {"type": "typing", "on": True})["seq"] == 1
    assert hub_on(store).publish("a", {"type": "typing", "on": False})["seq"] == 4


async def test_resume_replays_then_continues_live_without_gap_or_duplicate(store: Store) -> None:
    hub = hub_on(store)
    for n in range(10):
        hub.publish("c", {"type": "tool.progress", "index": 1, "name": "t", "note": str(n)})
    sub = hub.subscribe("c")
    sub.resume(4)
    first = [await sub.get() for _ in range(3)]
    for n in range(10, 13):  # published while the device is still replaying
        hub.publish("c", {"type": "tool.progress", "index": 1, "name": "t", "note": str(n)})
    rest = await drain(sub)
    assert seqs(first + rest) == list(range(5, 14))


async def test_a_slow_device_skips_superseded_updates_only(store: Store) -> None:
    hub = hub_on(store, queue_size=8)
    slow, fast = hub.subscribe("c"), hub.subscribe("c")
    fast_got: list[dict[str, Any]] = []
    hub.publish("c", {"type": "message.start", "message_id": "m1", "role": "assistant"})
    for n in range(1, 101):
        hub.publish("c", update("m1", "x" * n))
        fast_got += await drain(fast)  # a device that keeps up
    hub.publish("c", {"type": "message.stop", "message_id": "m1", "final_text": "x" * 100})
    fast_got += await drain(fast)
    got = await drain(slow)
    assert [f["type"] for f in got][0] == "message.start"
    assert got[-1]["type"] == "message.stop"
    texts = [len(f["text"]) for f in got if f["type"] == "message.update"]
    assert texts == sorted(texts) and len(texts) < 100  # skipped, never reordered
    assert slow.skipped > 0
    assert len(fast_got) == 102 and fast.skipped == 0  # the other device missed nothing


async def test_an_overflowing_device_reads_essential_frames_back_from_the_log(
    store: Store,
) -> None:
    hub = hub_on(store, queue_size=8)
    sub = hub.subscribe("c")
    for n in range(1, 41):  # tool frames are never dropped; 40 do not fit in 8
        hub.publish("c", {"type": "tool.start", "index": n, "name": "t", "preview": "", "args": {}})
    sub.send_local({"type": "pong"})
    got = await drain(sub)
    tools = [f["index"] for f in got if f["type"] == "tool.start"]
    assert tools == list(range(1, 41))
    assert sub.catchups == 1
    pong = next(f for f in got if f["type"] == "pong")
    before_pong = [f["seq"] for f in got[: got.index(pong)] if f["type"] != "pong"]
    assert pong["seq"] == max(before_pong, default=0)  # a valid resume point when seen
    hub.publish("c", {"type": "typing", "on": False})
    assert seqs(await drain(sub)) == [41]  # and it is live again


async def test_log_drops_superseded_updates_when_a_message_closes(store: Store) -> None:
    hub = hub_on(store)
    hub.publish("c", {"type": "message.start", "message_id": "m1", "role": "assistant"})
    hub.publish("c", update("m1", "He"))
    hub.publish("c", update("m1", "Hello"))
    mid_reply = hub.log.after("c", 0, 100)
    # A live message keeps one snapshot, the latest, with the whole text so far.
    assert [f["type"] for f in mid_reply] == ["message.start", "message.update"]
    assert mid_reply[-1]["text"] == "Hello" and mid_reply[-1]["seq"] == 3
    hub.publish("c", {"type": "commentary", "message_id": "m1", "text": "Hello"})
    assert [f["type"] for f in hub.log.after("c", 0, 100)] == ["message.start", "commentary"]


async def test_resume_below_the_log_floor_gets_a_sync_of_the_conversation(store: Store) -> None:
    hub = hub_on(store, max_frames=10)
    hub.publish("c", {"type": "message", "message_id": "u1", "role": "user", "text": "hi"})
    for n in range(1, 30):
        reply(hub, "c", f"m{n}", f"answer {n}")
    hub.publish("c", {"type": "message.start", "message_id": "live", "role": "assistant"})
    hub.publish("c", update("live", "still typ"))
    hub.log.prune("c")
    assert hub.log.floor("c") > 1
    sub = hub.subscribe("c")
    sub.resume(1)
    got = await drain(sub)
    assert [f["type"] for f in got] == ["sync"]
    assert got[0]["seq"] == hub.latest("c")
    messages = got[0]["messages"]
    assert messages[0] == {"message_id": "u1", "role": "user", "text": "hi"}
    assert messages[1]["text"] == "answer 1"
    assert messages[-1] == {"message_id": "live", "role": "assistant", "text": "still typ"}
    hub.publish("c", update("live", "still typing"))
    assert [f["text"] for f in await drain(sub)] == ["still typing"]


async def test_age_bound(store: Store) -> None:
    now = [1000.0]
    hub = hub_on(store, max_age=60.0, clock=lambda: now[0])
    for _ in range(5):
        hub.publish("c", {"type": "typing", "on": True})
    now[0] += 61
    hub.publish("c", {"type": "typing", "on": False})
    hub.log.prune("c")
    assert hub.log.floor("c") == 5
    assert seqs(hub.log.after("c", 0, 100)) == [6]
    assert hub_on(store).latest("c") == 6


async def test_resume_from_the_future_syncs(store: Store) -> None:
    hub = hub_on(store)
    reply(hub, "c", "m1", "hello")
    sub = hub.subscribe("c")
    sub.resume(999)  # a device that saw a previous incarnation of this chat
    got = await drain(sub)
    assert [f["type"] for f in got] == ["sync"]
    assert got[0]["seq"] == hub.latest("c")


async def test_excluded_device_does_not_get_the_frame_live(store: Store) -> None:
    hub = hub_on(store)
    sender, other = hub.subscribe("c"), hub.subscribe("c")
    hub.publish(
        "c", {"type": "message", "message_id": "u", "role": "user", "text": "x"}, exclude=sender
    )
    assert await drain(sender) == []
    assert [f["text"] for f in await drain(other)] == ["x"]


async def test_a_device_keeping_up_holds_no_bookkeeping_per_message(store: Store) -> None:
    hub = hub_on(store)
    sub = hub.subscribe("c")
    for n in range(50):
        reply(hub, "c", f"m{n}", "some text")
        await drain(sub)
    assert sub._newest == {}


# -- a property: whatever the timing, a device misses nothing that matters -----------------------


@settings(max_examples=150, deadline=None)
@given(ops, st.integers(2, 8))
def test_a_device_gets_every_frame_that_matters_once_in_order(
    plan: list[tuple[Any, ...]], capacity: int
) -> None:
    asyncio.run(check_plan(plan, capacity))


async def test_connection_frames_stay_within_the_bound_too(store: Store) -> None:
    hub = hub_on(store, queue_size=8)
    hub.publish("c", {"type": "message", "message_id": "u1", "role": "user", "text": "hi"})
    sub = hub.subscribe("c")
    for _ in range(1_000):
        sub.send_local({"type": "pong"})  # one waiting answers them all
        sub.resume(99)  # past the end: a sync, which replaces the one waiting
    assert sub.pending() == 2 and sub.high_water <= 8 and not sub.overflowed
    got = await drain(sub)
    assert [f["type"] for f in got] == ["pong", "sync"]
    for _ in range(9):  # answers that cannot be merged: the device has to go
        sub.send_local({"type": "error", "code": "no_turn", "message": "no turn is running"})
    assert sub.overflowed and sub.pending() == 0
    hub.publish("c", {"type": "typing", "on": True})  # it takes nothing more in
    assert sub.pending() == 0
    with pytest.raises(TooSlow):
        await sub.get()


def test_a_frame_with_a_lone_surrogate_encodes_to_utf8() -> None:
    text = encode_frame({"type": "message", "text": "a\ud800b \ud83d\ude00"})
    assert text.encode() == '{"type":"message","text":"a\ufffdb 😀"}'.encode()


# -- the fan-out knows no frame type: it does what the protocol's marks say ----------------------


class OtherProtocol:
    """A protocol whose frame types the fan-out has never heard of."""

    marks: ClassVar[dict[str, Traits]] = {
        "hi": Traits(opens=True),
        "draft": Traits(snapshot=True),
        "done": Traits(closes=True),
        "busy": Traits(turn=True),
        "beat": Traits(one_pending="first"),
    }

    def traits(self, kind: str) -> Traits:
        return self.marks.get(kind, PLAIN)

    def snapshot_text(self, frame: Frame) -> str:
        return frame["body"]

    def snapshot_with(self, frame: Frame, text: str) -> Frame:
        return {**frame, "body": text}

    def transcript_entry(self, frame: Frame) -> dict[str, Any] | None:
        if frame["type"] != "done":
            return None
        return {"message_id": frame["message_id"], "role": "assistant", "text": frame["body"]}

    def sync(self, messages: list[dict[str, Any]], epoch: str, approvals: list[Frame]) -> Frame:
        return {"type": "catch-up", "messages": messages, "epoch": epoch}

    def turn_open(self, frame: Frame) -> bool:
        return frame["on"]


async def test_the_fan_out_follows_the_protocols_marks_whatever_its_frames_are_called(
    store: Store,
) -> None:
    hub = Hub(SqliteFrameLog(store, rules=OtherProtocol()), queue_size=256)
    sub = hub.subscribe("c")
    hub.publish("c", {"type": "busy", "on": True})
    hub.publish("c", {"type": "hi", "message_id": "a"})
    for n in range(1, 4):
        hub.publish("c", {"type": "draft", "message_id": "a", "body": "x" * n})
    assert hub.log.open_messages("c") == {"a": "xxx"}
    assert hub.log.turn_open("c") and await hub.log.open_turns() == ["c"]
    for _ in range(3):
        sub.send_local({"type": "beat"})  # one waiting answers them all
    got = [f["type"] for f in await drain(sub)]
    assert got == ["busy", "hi", "draft", "beat"]  # a slow device skips superseded drafts
    hub.publish("c", {"type": "done", "message_id": "a", "body": "final"})
    hub.publish("c", {"type": "busy", "on": False})
    assert [f["type"] for f in hub.log.after("c", 0, 10)] == ["busy", "hi", "done", "busy"]
    assert hub.log.messages("c") == [{"message_id": "a", "role": "assistant", "text": "final"}]
    assert not hub.log.turn_open("c")
    sub.resume(99)  # past the end: the protocol's own catch-up frame, in place of the rest
    [catch_up] = await drain(sub)
    assert catch_up["type"] == "catch-up" and catch_up["messages"][0]["text"] == "final"

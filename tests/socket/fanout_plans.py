"""Fan-out plans (devices joining, leaving, resuming over a reply's updates) and what a device must end up with, for the hub's tests here and on Redis."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import strategies as st

from iris.fanout.framelog import SqliteFrameLog
from iris.fanout.hub import Hub
from iris.fanout.subscription import Subscription
from iris.protocol.types import RULES
from iris.state.sqlite import Store


def update(message_id: str, text: str) -> dict[str, Any]:
    return {"type": "message.update", "message_id": message_id, "text": text}


def reply(hub: Hub, chat: str, message_id: str, text: str, *, steps: int = 3) -> None:
    """A streamed reply: start, ``steps`` growing updates, stop."""
    hub.publish(chat, {"type": "message.start", "message_id": message_id, "role": "assistant"})
    for n in range(1, steps + 1):
        hub.publish(chat, update(message_id, text[: n * len(text) // steps]))
    hub.publish(chat, {"type": "message.stop", "message_id": message_id, "final_text": text})


async def drain(sub: Subscription) -> list[dict[str, Any]]:
    """Everything the device would be sent right now."""
    got: list[dict[str, Any]] = []
    while True:
        try:
            async with asyncio.timeout(0.01):
                got.append(await sub.get())
        except TimeoutError:
            return got


def seqs(frames: list[dict[str, Any]]) -> list[int]:
    return [f["seq"] for f in frames]


ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("publish"),
            st.sampled_from(["start", "update", "stop", "tool"]),
            st.sampled_from("ab"),
        ),
        st.tuples(st.just("drain"), st.integers(0, 12)),
        st.tuples(st.just("resume"), st.integers(0, 15)),
        st.tuples(st.just("ping")),
    ),
    max_size=80,
)


def body(kind: str, message_id: str, n: int) -> dict[str, Any]:
    match kind:
        case "start":
            return {"type": "message.start", "message_id": message_id, "role": "assistant"}
        case "update":
            return update(message_id, "x" * n)
        case "stop":
            return {"type": "message.stop", "message_id": message_id, "final_text": "done"}
        case _:
            return {"type": "tool.start", "index": n, "name": "t", "preview": "", "args": {}}


async def check_plan(plan: list[tuple[Any, ...]], capacity: int, hub: Hub | None = None) -> None:
    """The property on ``hub`` (default: a fresh SQLite one; tests/scale runs it on Redis)."""
    if hub is None:
        hub = Hub(SqliteFrameLog(Store(":memory:"), rules=RULES), queue_size=capacity)
    sub = hub.subscribe("c")
    published: list[dict[str, Any]] = []
    got: list[dict[str, Any]] = []  # chat frames since the last resume
    point = 0  # the last resume point
    seen = 0  # the highest seq the device has seen, connection frames included

    async def take(n: int) -> None:
        nonlocal seen
        for _ in range(n):
            if sub.idle:
                return
            frame = await sub.get()
            assert frame["seq"] >= seen  # a seen seq is always a valid resume point
            seen = frame["seq"]
            if frame["type"] != "pong":
                got.append(frame)

    for n, step in enumerate(plan):
        match step:
            case ("publish", kind, message_id):
                published.append(hub.publish("c", body(kind, message_id, n)))
            case ("drain", count):
                await take(count)
            case ("resume", back):
                point = seen = max(0, seen - back)
                got.clear()
                sub.resume(point)
            case _:
                sub.send_local({"type": "pong"})
    await take(10_000)
    assert [f["seq"] for f in got] == sorted({f["seq"] for f in got})  # in order, no duplicate
    after = [f for f in published if f["seq"] > point]
    essential = [f["seq"] for f in after if f["type"] != "message.update"]
    assert [f["seq"] for f in got if f["type"] != "message.update"] == essential
    for message_id in "ab":  # and each message's newest frame always arrives
        mine = [f["seq"] for f in after if f.get("message_id") == message_id]
        if mine:
            assert [f["seq"] for f in got if f.get("message_id") == message_id][-1] == mine[-1]

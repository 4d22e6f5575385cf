"""Frame-log plans on Redis: two hubs over one log, typing and the reply's updates, for the single-node and cluster tests."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from hypothesis import strategies as st

from iris.fanout.hub import Hub
from iris.fanout.redis_log import RedisFrameLog
from iris.fanout.subscription import Subscription
from iris.fanout.tailer import Tailer
from iris.protocol.types import RULES
from iris.state.redis_store import RedisStore
from tests.socket.fanout_plans import seqs, update


def redis_log(hub: Hub) -> RedisFrameLog:
    assert isinstance(hub.log, RedisFrameLog)
    return hub.log


@contextlib.asynccontextmanager
async def tailing(hub: Hub) -> AsyncGenerator[Tailer]:
    """The hub's tailer running, as ``SocketSurface`` runs it."""
    log = redis_log(hub)
    tailer = Tailer(log.store, log, hub)
    task = asyncio.create_task(tailer.run())
    try:
        yield tailer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await log.store.aclose()


async def until_seq(sub: Subscription, seq: int, within: float = 5.0) -> list[dict[str, Any]]:
    """Frames the device is sent until one with ``seq`` (a hang fails in ``within`` s)."""
    got: list[dict[str, Any]] = []
    async with asyncio.timeout(within):
        while not got or got[-1]["seq"] < seq:
            got.append(await sub.get())
    return got


def typing(on: bool) -> dict[str, Any]:
    return {"type": "typing", "on": on}


plans = st.lists(
    st.tuples(
        st.sampled_from("ab"),
        st.sampled_from(["plain", "start", "update", "stop", "pause"]),
    ),
    min_size=1,
    max_size=40,
)


async def check_two_hubs(url: str, plan: list[tuple[str, str]], mode: str = "single") -> None:
    chat = uuid.uuid4().hex
    hubs = {
        name: Hub(RedisFrameLog(RedisStore(url, mode=mode), rules=RULES), queue_size=10_000)
        for name in "ab"
    }
    async with tailing(hubs["a"]), tailing(hubs["b"]):
        subs = {name: hub.subscribe(chat) for name, hub in hubs.items()}
        published: list[dict[str, Any]] = []
        for n, (side, kind) in enumerate(plan):
            if kind == "pause":
                await asyncio.sleep(0)  # the tailers may run here, or not
                continue
            body: dict[str, Any] = {
                "plain": {"type": "tool.progress", "index": 1, "name": "t", "note": str(n)},
                "start": {"type": "message.start", "message_id": "m", "role": "assistant"},
                "update": update("m", "x" * n),
                "stop": {"type": "message.stop", "message_id": "m", "final_text": "done"},
            }[kind]
            published.append(hubs[side].publish(chat, body))
        if not published:
            return
        last = published[-1]["seq"]
        assert seqs(published) == list(range(1, last + 1))
        for sub in subs.values():
            got = await until_seq(sub, last)
            assert seqs(got) == sorted(set(seqs(got)))  # in order, never twice
            # Nothing but a superseded snapshot may be missing.
            expected = [f for f in published if f["type"] != "message.update"]
            assert [f for f in got if f["type"] != "message.update"] == expected
            by_seq = {f["seq"]: f for f in published}
            assert all(by_seq[f["seq"]] == f for f in got)

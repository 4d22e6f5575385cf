"""Two ``iris serve`` processes on one Redis: one frame log per chat, every device on either
process sees the same frames under the same seqs, and a device may come back on the other."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.upstream import FakeUpstream, gated
from tests.scale.across import (
    a_device_resumes_on_the_other_process_without_gap_or_duplicate,
    devices_on_both_processes_see_one_log,
)
from tests.scale.conftest import RedisServer, serve_on_redis, socket_url
from tests.scale.devices import STREAMING, chat_frames, device, essential, increasing
from tests.socket.conftest import TOKEN

RECONNECT_WAIT = 20.0  # seconds a device waits for a turn that follows a Redis restart


@pytest.fixture
def two(
    tmp_path: Path, redis_server: RedisServer, upstream: FakeUpstream
) -> Iterator[tuple[str, str]]:
    """Two ``iris serve`` processes sharing ``redis_server``; their iris socket URLs."""
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        redis_server,
        platforms={"iris": {"enabled": True, "tokens": [TOKEN]}},
        streaming=STREAMING,
        # Every delta its own update: the frames the two processes must agree on.
        display={"platforms": {"iris": {"buffer_threshold": 1}}},
    ) as running:
        yield socket_url(running[0][1]), socket_url(running[1][1])


async def test_a_device_moving_to_the_other_process_mid_reply_follows_the_turn_there(
    two: tuple[str, str], upstream: FakeUpstream
) -> None:
    """The phone's connection drops mid-reply and the load balancer sends it to B while the turn
    still runs on A: B replays what it missed and follows the rest live; B's room does not take
    the running turn for a crashed one."""
    upstream.script(gated("one ", "two ", "three ", "four", after=2))
    a_url, b_url = two
    stays, moves = await device(a_url), await device(a_url)
    await stays.send({"type": "message.send", "text": "count"})
    await moves.until("message.update", text="one two ")
    seen = moves.max_seq
    await moves.close()
    back = await device(b_url, after_seq=seen)  # the turn is still held upstream
    assert not upstream.finished.is_set()
    upstream.release()
    whole = await stays.turn()
    rest = chat_frames(await back.turn())
    assert all(f["seq"] > seen for f in rest) and increasing(rest)
    assert essential(rest) == essential([f for f in whole if f["seq"] > seen])
    assert not any(f["type"] == "error" for f in whole + rest)  # not closed as owner_lost
    assert rest[-2]["final_text"] == "one two three four"
    await stays.close()
    await back.close()


async def test_devices_keep_following_the_other_process_after_redis_restarts(
    two: tuple[str, str], upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    a_url, b_url = two
    on_a, on_b = await device(a_url), await device(b_url)
    upstream.script(gated("before", after=1))
    upstream.release()
    await on_a.send({"type": "message.send", "text": "one"})
    before = chat_frames(await on_b.turn())
    redis_server.stop()  # both processes' tailers lose it, and their next reads fail ...
    await on_a.send({"type": "message.send", "text": "lost"})
    refused = await on_a.until("error")
    assert refused[-1]["code"] == "store_unavailable"
    redis_server.start()  # ... until it is back (AOF: nothing acknowledged is gone)
    upstream.script(gated("after", after=1))
    upstream.release()
    await on_a.send({"type": "message.send", "text": "two"})
    # B's tailer comes back on its own retry (waits doubling to 2 s), which on a machine
    # running the suite's three workers has taken longer than one ordinary wait.
    after = chat_frames(await on_b.turn(within=RECONNECT_WAIT))
    assert after[0]["text"] == "two" and after[0]["seq"] == before[-1]["seq"] + 1
    assert after[-2]["final_text"] == "after"
    await on_a.close()
    await on_b.close()


async def test_devices_on_both_processes_see_one_log(
    two: tuple[str, str], upstream: FakeUpstream
) -> None:
    await devices_on_both_processes_see_one_log(two, upstream)


async def test_a_device_resumes_on_the_other_process_without_gap_or_duplicate(
    two: tuple[str, str], upstream: FakeUpstream
) -> None:
    await a_device_resumes_on_the_other_process_without_gap_or_duplicate(two, upstream)

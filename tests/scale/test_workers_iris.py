"""``iris serve --workers 2`` with the iris socket: devices of one chat that landed on either
worker (one port) all see one reply under the same seqs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.served import Served, serve
from tests.fakes.upstream import FakeUpstream, text
from tests.scale.conftest import RedisServer
from tests.scale.devices import device, essential, increasing
from tests.scale.workers import sockets, until, workers_of
from tests.socket.conftest import TOKEN

pytestmark = pytest.mark.timeout(90)

DEVICES = 16  # all on one of two workers by chance: 2 in 2**16


@pytest.fixture
def workers(
    tmp_path: Path, redis_server: RedisServer, upstream: FakeUpstream
) -> Iterator[tuple[Served, int]]:
    server, url = serve(
        tmp_path,
        upstream.base_url,
        store={"url": redis_server.url, "path": str(tmp_path / "iris.db")},
        platforms={"iris": {"enabled": True, "tokens": [TOKEN]}},
        streaming={"enabled": True},
        args=("--workers", "2"),
    )
    try:
        port = int(url.rsplit(":", 1)[1])
        pids = workers_of(server.process.pid)
        until(lambda: all(sockets(pid, port, "0A") for pid in pids))  # both listen
        yield server, port
    finally:
        server.stop()


async def test_devices_on_both_workers_see_one_reply_with_the_same_seqs(
    workers: tuple[Served, int], upstream: FakeUpstream
) -> None:
    server, port = workers
    devices = [await device(f"ws://127.0.0.1:{port}/iris/ws") for _ in range(DEVICES)]
    spread = [sockets(pid, port, "01") for pid in workers_of(server.process.pid)]
    assert min(spread) > 0, spread  # the devices are on both workers

    upstream.script(text("one ", "two ", "three"))
    await devices[0].send({"type": "message.send", "text": "count"})
    sender = await devices[0].turn()
    assert sender[-2]["final_text"] == "one two three" and increasing(sender)
    for other in devices[1:]:
        got = await other.turn()
        assert increasing(got)
        # Every worker's devices: the user's echo, then exactly the sender's frames and seqs.
        assert essential(got)[1:] == essential(sender)
    for dev in devices:
        await dev.close()

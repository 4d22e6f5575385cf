"""Finding 7 of the second pass: the blocking pool had no limit, so 300 background followers
took Redis from 41 to 236 clients and left 138 connected. Every pool is bounded now: many
blocked readers wait for a connection, and the process never holds more than its maximum."""

from __future__ import annotations

import asyncio

from iris.state.redis_store import FOLLOWING_CONNECTIONS, MAX_CONNECTIONS, RedisStore
from tests.scale.conftest import RedisServer, redis_server  # noqa: F401  (fixture)


async def test_three_hundred_followers_share_a_bounded_pool(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    probe = redis_server.client()
    store = RedisStore(redis_server.url)
    try:
        before = int(probe.info("clients")["connected_clients"])
        most = [0]
        started = asyncio.Event()

        async def follower(n: int) -> None:
            started.set()
            await store.following.xread({f"run:{n}": "0-0"}, block=100)

        async def watch() -> None:
            await started.wait()
            while True:
                most[0] = max(most[0], int(probe.info("clients")["connected_clients"]) - before)
                await asyncio.sleep(0.01)

        watcher = asyncio.create_task(watch())
        await asyncio.gather(*(follower(n) for n in range(300)))
        watcher.cancel()
        assert 0 < most[0] <= FOLLOWING_CONNECTIONS + 1, most[0]
        after = int(probe.info("clients")["connected_clients"]) - before
        assert after <= FOLLOWING_CONNECTIONS
        assert MAX_CONNECTIONS < 200  # the documented maximum per process
    finally:
        await store.aclose()
        probe.close()

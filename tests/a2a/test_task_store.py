"""A2A tasks and push configs in ``state/``: what one process saved, another reads (SQLite file,
or Redis shared by every process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iris.state.a2a_tasks import A2aTasks, a2a_tasks_for
from iris.state.redis_store import RedisStore
from iris.state.sqlite import Store
from tests.scale.conftest import RedisServer, redis_server  # noqa: F401  (fixture)


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_a_task_saved_by_one_process_is_read_listed_and_pushed_by_another(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    stores: list[A2aTasks] = []
    shared: list[RedisStore] = []
    for _ in range(2):  # two processes: two connections to the same store
        store = Store(tmp_path / "iris.db")
        redis = None
        if backend == "redis":
            server: RedisServer = request.getfixturevalue("redis_server")
            redis = RedisStore(server.url)
            shared.append(redis)
        stores.append(a2a_tasks_for(store, redis))
    one, other = stores
    try:
        await one.save("t1", "ctx", '{"id": "t1", "v": 1}')
        await one.save("t2", "ctx", '{"id": "t2"}')
        await one.save("t1", "ctx", '{"id": "t1", "v": 2}')  # t1 changed last
        await one.save("t3", "other", '{"id": "t3"}')
        await one.set_push("t1", "p1", '{"url": "https://a"}')
        await one.set_push("t1", "p2", '{"url": "https://b"}')
        assert await other.get("t1") == '{"id": "t1", "v": 2}'
        assert await other.recent("ctx", 10) == ['{"id": "t1", "v": 2}', '{"id": "t2"}']
        assert len(await other.recent(None, 10)) == 3
        assert await other.pushes("t1") == {
            "p1": '{"url": "https://a"}',
            "p2": '{"url": "https://b"}',
        }
        await other.drop_push("t1", "p1")
        assert list(await one.pushes("t1")) == ["p2"]
        await other.delete("t1")
        assert await one.get("t1") is None and await one.pushes("t1") == {}
        assert await one.get("missing") is None
    finally:
        for redis in shared:
            await redis.aclose()

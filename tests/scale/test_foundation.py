"""The shared store's foundation against a real redis-server: the startup check, failures as
``StoreUnavailable``, and the lease (one holder; compare-and-set renew and release)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from iris.config import Config
from iris.errors import StoreUnavailable
from iris.state.lease import Lease, holder_process
from iris.state.redis_store import RedisStore, redacted
from tests.fakes.served import free_port
from tests.scale.conftest import RedisServer
from tests.scale.topologies import ephemeral_range


def test_the_check_passes_on_a_live_server(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url)
    store.check()
    # A chat's keys share one hash tag (one cluster slot); the rest sit under the prefix.
    assert store.chat_key("c1", "log") == "iris{chat:c1}:log"
    assert store.key("proc", "p1", "inbox") == "iris:proc:p1:inbox"
    store.close()


def test_a_restarted_redis_finds_its_port_free_and_its_data_kept(
    redis_server: RedisServer,
) -> None:
    """A test's Redis is stopped and started again on its port (as the restart tests do). Its
    port lies below the range the kernel takes outgoing connections' ports from, so none of
    the connections a busy test run opens meanwhile can hold it when it starts again."""
    low = ephemeral_range()[0]
    assert redis_server.port < low or low < 12_000  # (a range from that low leaves no room)
    redis_server.client().set("kept", "yes")
    redis_server.stop()
    redis_server.start()
    assert redis_server.client().get("kept") == "yes"


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    store = RedisStore(f"redis://:hunter2@127.0.0.1:{free_port()}/0", timeout=0.5)
    with pytest.raises(StoreUnavailable) as caught:
        store.check()
    message = caught.value.message
    assert "cannot reach the store" in message and "\n" not in message
    assert "hunter2" not in message and "***" in message
    store.close()


def test_redacted_keeps_urls_without_a_password() -> None:
    assert redacted("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


def test_the_store_url_must_be_redis() -> None:
    with pytest.raises(ValueError, match="redis://"):
        Config.model_validate({"store": {"url": "http://127.0.0.1:6379"}})


def test_iris_serve_refuses_to_start_without_its_redis(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"server: {{port: {free_port()}}}\n"
        f"store: {{path: {tmp_path / 'iris.db'}, url: 'redis://127.0.0.1:{free_port()}/0'}}\n"
        "platforms: {iris: {enabled: false}}\n"
    )
    config.chmod(0o600)
    done = subprocess.run(
        [sys.executable, "-m", "iris.cli", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the store" in lines[0], done.stderr


async def test_one_holder_at_a_time_and_only_the_holder_renews_or_releases(
    redis_server: RedisServer,
) -> None:
    a, b = RedisStore(redis_server.url), RedisStore(redis_server.url)
    first, second = Lease(a, a.key("lease", "x"), 5), Lease(b, b.key("lease", "x"), 5)
    assert await first.acquire()
    assert not await second.acquire()
    assert holder_process(await second.holder()) == a.process_id
    assert not await second.renew()
    await second.release()  # not the holder: changes nothing
    assert await first.renew()
    await first.release()
    assert await second.acquire()
    await a.aclose()
    await b.aclose()


async def test_a_lease_whose_holder_stops_renewing_expires_and_keep_reports_the_loss(
    redis_server: RedisServer,
) -> None:
    a, b = RedisStore(redis_server.url), RedisStore(redis_server.url)
    dead, alive = Lease(a, a.key("lease", "y"), 1), Lease(b, b.key("lease", "y"), 1)
    assert await dead.acquire()  # and never renewed: its process "died"
    for _ in range(100):
        if await alive.acquire():
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the lease never expired")
    lost = asyncio.Event()
    await asyncio.wait_for(dead.keep(lost.set), timeout=5)  # its first renewal finds b there
    assert lost.is_set()
    await a.aclose()
    await b.aclose()

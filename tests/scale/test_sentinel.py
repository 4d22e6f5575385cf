"""Iris through Redis Sentinel (a primary, its replica and three Sentinels, started once for
this module): the store is the primary the Sentinels name, the primary killed mid-turn ends
that turn cleanly (or lets it finish) and the next message works on the promoted replica, and
a Sentinel or an unknown primary name is one line at start. What two processes share through
it: ``test_topologies.py``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iris.state.redis_store import RedisStore
from tests.fakes.served import Served
from tests.fakes.upstream import FakeUpstream, gated
from tests.scale.conftest import serve_on_redis, socket_url
from tests.scale.devices import STREAMING, chat_frames, device, increasing
from tests.scale.refusals import refusal
from tests.scale.topologies import REDIS_SERVER, SentinelSetup
from tests.socket.conftest import TOKEN

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelSetup]:
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (apt install redis-server; .ci/run does)")
    found = SentinelSetup(tmp_path_factory.mktemp("sentinel"))
    try:
        found.start()
        yield found
    finally:
        found.stop()


@pytest.fixture
def sentinel_store(sentinel: SentinelSetup) -> dict[str, Any]:
    """``store`` keys for ``iris serve`` through the Sentinels (a fresh prefix: a fresh store)."""
    return {**sentinel.store(), "prefix": uuid.uuid4().hex[:12], "lease": 2}


@pytest.fixture
def two_sockets(
    tmp_path: Path, sentinel: SentinelSetup, sentinel_store: dict[str, Any], upstream: FakeUpstream
) -> Iterator[list[tuple[Served, str]]]:
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        sentinel,
        store=sentinel_store,
        platforms={"iris": {"enabled": True, "tokens": [TOKEN]}},
        streaming=STREAMING,
        display={"platforms": {"iris": {"buffer_threshold": 1}}},
    ) as running:
        yield [(server, socket_url(url)) for server, url in running]


def test_a_sentinel_in_single_mode_and_an_unknown_primary_are_one_line(
    tmp_path: Path, sentinel: SentinelSetup
) -> None:
    line = refusal(tmp_path, {"url": f"redis://{sentinel.addresses[0]}/0"})
    assert "is a Redis Sentinel" in line and "store.mode: sentinel" in line, line
    line = refusal(
        tmp_path,
        {"mode": "sentinel", "sentinels": f"[{sentinel.addresses[0]}]", "sentinel_master": "nope"},
    )
    assert "'nope'" in line and "store.sentinel_master" in line, line


def test_the_store_is_the_primary_the_sentinels_name(sentinel: SentinelSetup) -> None:
    store = RedisStore(
        None, mode="sentinel", sentinels=sentinel.addresses, sentinel_master=sentinel.MASTER
    )
    store.check()
    store.sync.set("iris:probe", "1")
    primary = sentinel.primary.client()
    assert primary.get("iris:probe") == "1"
    primary.close()
    store.close()


# Last in the module: the primary it kills stays dead (the replica serves from then on).
async def test_the_primary_killed_mid_turn_ends_it_cleanly_and_the_next_message_works(
    two_sockets: list[tuple[Served, str]], sentinel: SentinelSetup, upstream: FakeUpstream
) -> None:
    (_, a_url), (_, b_url) = two_sockets
    upstream.script(gated("one ", "two ", "three", after=2), gated("again", after=0))
    on_a, on_b = await device(a_url), await device(b_url)
    await on_a.send({"type": "message.send", "text": "count"})
    await on_b.until("message.update", text="one two ")
    sentinel.primary.kill()
    upstream.release()
    a_turn = chat_frames(await on_a.turn(within=30))
    # Finished, or ended with an error: either way closed with typing off, in order.
    assert a_turn[-1]["type"] == "typing" and a_turn[-1]["on"] is False
    assert increasing(a_turn)
    assert sentinel.current_primary_port() == sentinel.replica.port  # promoted
    # The next message, through the other process, runs on the promoted replica.
    await on_b.close()
    on_b = await device(b_url)
    await on_b.send({"type": "message.send", "text": "next"})
    upstream.release()
    after = chat_frames(await on_b.turn(within=30))
    stop = next(f for f in after if f["type"] == "message.stop")
    assert stop["final_text"] == "again"
    assert increasing(after)
    await on_a.close()
    await on_b.close()

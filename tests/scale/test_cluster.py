"""Iris on a real Redis Cluster (3 primaries, 3 replicas, started once for this module): every
store operation runs with no ``CROSSSLOT``, the tailer reads chats on every shard in order
and follows a failover, a failover mid-turn ends the turn cleanly, and a store of the wrong
kind is one line at start. What two processes share through it: ``test_topologies.py``."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from iris.errors import StoreUnavailable
from iris.fanout.hub import Hub
from iris.fanout.redis_log import PRUNE_EVERY, RedisFrameLog
from iris.fanout.tailer import Tailer
from iris.protocol.types import RULES
from iris.state.background import SharedRuns
from iris.state.controls import Controls, RedisControls
from iris.state.devices import RedisDevices
from iris.state.item_lists import RedisItemLists
from iris.state.lease import Lease, LeaseLost
from iris.state.redis_store import RedisStore
from iris.state.responses import RedisResponses
from iris.state.sessions import RedisSessions
from iris.state.turn_owners import TurnOwners
from tests.fakes.served import Served, free_port
from tests.fakes.upstream import FakeUpstream, gated
from tests.scale.conftest import RedisServer, serve_on_redis, socket_url
from tests.scale.devices import STREAMING, chat_frames, device, increasing
from tests.scale.framelog_plans import check_two_hubs, plans, typing
from tests.scale.refusals import refusal
from tests.scale.topologies import REDIS_CLI, REDIS_SERVER, Cluster
from tests.socket.conftest import TOKEN
from tests.socket.fanout_plans import update

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if REDIS_SERVER is None or REDIS_CLI is None:
        pytest.skip("redis-server is not installed (apt install redis-server; .ci/run does)")
    found = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        found.start()
        yield found
    finally:
        found.stop()


@pytest.fixture
def store(cluster: Cluster) -> Iterator[RedisStore]:
    """A cluster store under a fresh prefix (a fresh store for each test)."""
    made = RedisStore(cluster.url, mode="cluster", prefix=uuid.uuid4().hex[:12], timeout=2.0)
    made.check()
    yield made
    made.close()


def chats_on_every_primary(cluster: Cluster, store: RedisStore, count: int = 9) -> list[str]:
    """``count`` chat ids whose keys spread over all three primaries."""
    by_node: dict[int, list[str]] = {}
    n = 0
    while min((len(v) for v in by_node.values()), default=0) < count // 3 or len(by_node) < 3:
        chat = f"c{n}"
        by_node.setdefault(cluster.node_for(store.chat_key(chat, "log")).port, []).append(chat)
        n += 1
    return [chat for chats in by_node.values() for chat in chats[: count // 3]]


# -- every store operation, no CROSSSLOT -----------------------------------------------------------
async def test_every_store_operation_runs_on_a_cluster(cluster: Cluster, store: RedisStore) -> None:
    chats = chats_on_every_primary(cluster, store)
    await frame_log_operations(store, chats)
    await ownership_operations(store, chats)
    await background_operations(store)
    await data_operations(store)
    await store.aclose()


async def frame_log_operations(store: RedisStore, chats: list[str]) -> None:
    log = RedisFrameLog(store, rules=RULES, max_frames=3)
    for chat in chats:
        first = log.sequence(chat, typing(True), None)
        assert first[-1][0]["seq"] == 1
        log.sequence(chat, {"type": "message.start", "message_id": "m", "role": "assistant"}, 1)
        log.sequence(chat, update("m", "hel"), 2)
        log.sequence(chat, update("m", "hello"), 3)
        assert log.turn_open(chat)
        assert log.open_messages(chat) == {"m": "hello"}
        assert log.messages(chat)[-1]["text"] == "hello"
        log.sequence(chat, {"type": "message.stop", "message_id": "m", "final_text": "hello"}, 4)
        log.sequence(chat, typing(False), 5)
        assert not log.turn_open(chat)
        assert log.last_seq(chat) == 6
        assert [f["seq"] for f in log.after(chat, 2, 10)] == [5, 6]  # snapshots superseded
        assert log.messages(chat)[-1]["text"] == "hello"
    log.sequence(chats[0], typing(True), None)
    assert await log.open_turns() == [chats[0]]
    for n in range(PRUNE_EVERY):  # the trim script's round, with the floor
        log.sequence(
            chats[1], {"type": "tool.progress", "index": 1, "name": "t", "note": str(n)}, None
        )
    log.prune(chats[1])
    assert log.floor(chats[1]) > 0
    # The fence: the lease key is named in the append script with the chat's keys.
    lease = Lease(store, store.chat_key(chats[2], "turn"), 5)
    assert await lease.acquire()
    log.fence(chats[2], lease.key, lease.token)
    log.sequence(chats[2], typing(True), None)
    await lease.release()
    with pytest.raises(LeaseLost):
        log.sequence(chats[2], typing(False), None)
    log.unfence(chats[2])


async def ownership_operations(store: RedisStore, chats: list[str]) -> None:
    other = RedisStore(store.url, mode="cluster", prefix=store.prefix)
    mine, theirs = TurnOwners(store, 5), TurnOwners(other, 5)
    asked: list[tuple[str, str]] = []
    heard = asyncio.Event()

    def cancel(chat: str, token: str) -> None:
        asked.append((chat, token))
        heard.set()

    listening = asyncio.create_task(mine.listen(cancel))
    try:
        leases = {chat: mine.claim(chat) for chat in chats}
        assert all(leases.values())
        assert theirs.claim(chats[0]) is None  # one turn per chat across processes
        lease = leases[chats[0]]
        assert lease is not None
        assert theirs.holder(chats[0]) == lease.token
        theirs.ask_cancel(chats[0], lease.token)  # lands in this process's inbox
        await asyncio.wait_for(heard.wait(), 10)
        assert asked == [(chats[0], lease.token)]
        assert await theirs.orphans() == {}
        for chat, held in leases.items():
            assert held is not None
            mine.release(chat, held, done=chat != chats[1])
        assert await theirs.orphans() == {chats[1]: leases[chats[1]].token}  # pyright: ignore[reportOptionalMemberAccess]
        await theirs.forget(chats[1], leases[chats[1]].token)  # pyright: ignore[reportOptionalMemberAccess]
        assert await theirs.orphans() == {}
        renewed = Lease(store, store.key("poller", "telegram", "x"), 5)
        assert await renewed.acquire() and await renewed.renew()
        assert await renewed.holder() == renewed.token
        await renewed.release()
    finally:
        listening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listening
        await other.aclose()


async def background_operations(store: RedisStore) -> None:
    runs = SharedRuns(store, ttl=60, lease=5)
    rid = "resp_" + uuid.uuid4().hex
    snapshot: dict[str, Any] = {"id": rid, "status": "in_progress"}
    lease = await runs.announce(rid, snapshot, [{"role": "user", "content": "hi"}])
    publisher = runs.publisher(rid, lambda: snapshot)
    publisher.lease = lease
    writing = asyncio.create_task(publisher.run())
    publisher.add([{"type": "response.created", "sequence_number": 0}])
    entries, ended = await runs.read(rid, "0-0", block=5)
    assert [e[0] for e in entries] == ["1-0"] and not ended
    await runs.refresh([rid])
    await runs.store.aio.set(runs.cancel_key(rid), "1")
    assert await runs.cancelled([rid, "resp_other"]) == [rid]
    snapshot = {"id": rid, "status": "completed"}
    publisher.end()
    await asyncio.wait_for(writing, 10)
    assert await runs.state(rid) == (snapshot, True)
    assert await runs.orphans() == []
    # A run whose owner died: the survivor takes it and ends it.
    lost = "resp_" + uuid.uuid4().hex
    await runs.announce(lost, {"id": lost, "status": "in_progress"}, None)
    await store.aio.delete(runs.lease_key(lost))  # its owner stopped renewing
    assert await runs.orphans() == [lost]
    taken = await runs.take(lost)
    assert taken is not None
    found = await runs.abandoned(lost)
    assert found is not None and found[2] == 0
    await runs.close(lost, [{"type": "response.failed", "sequence_number": 0}], {"id": lost})
    await runs.release(taken)
    assert await runs.orphans() == []
    await runs.forget(lost)
    assert await runs.cancel(lost, within=1) == {"id": lost}


async def data_operations(store: RedisStore) -> None:
    sessions = RedisSessions(store)
    for name in ("iris:a", "iris:b", "iris:c"):
        await sessions.append(name, [{"role": "user", "content": f"hello {name}"}])
    await sessions.append("iris:a", [{"role": "assistant", "content": "hi"}])
    await sessions.cut("iris:a", "summary")
    assert (await sessions.transcript("iris:a")).summary == "summary"
    assert await sessions.last("iris:a") == {"role": "assistant", "content": "hi"}
    found = await sessions.summaries("iris:", 10)
    assert {s.session for s in found} == {"iris:a", "iris:b", "iris:c"}
    assert all(s.first_user is not None for s in found)
    await sessions.reset("iris:b")
    assert await sessions.history("iris:b") == []
    responses = RedisResponses(store)
    items = [{"id": f"msg_{n}", "type": "message"} for n in range(6)]  # keys on every shard
    await responses.save({"id": "resp_1", "output": items}, [{"role": "user", "content": "q"}])
    assert await responses.response("resp_1") == {"id": "resp_1", "output": items}
    assert await responses.history("resp_1") == [{"role": "user", "content": "q"}]
    assert await responses.items([i["id"] for i in items] + ["msg_none"]) == {
        i["id"]: i for i in items
    }
    others = [{"id": f"msg_two_{n}", "type": "message"} for n in range(4)]
    await responses.save(
        {"id": "resp_2", "output": others}, [], inputs=[{"role": "user", "content": "in"}]
    )
    assert await responses.input_items("resp_2") == [{"role": "user", "content": "in"}]
    assert await responses.delete("resp_2")
    assert await responses.response("resp_2") is None
    assert await responses.items([i["id"] for i in others]) == {}  # its items went with it
    conversations = RedisItemLists(store)
    for n in range(4):  # conversation ids on several shards
        conversation = {"id": f"conv_{n}", "object": "conversation", "metadata": {}}
        await conversations.create(conversation, [{"id": f"msg_c{n}", "type": "message"}])
        assert await conversations.append(f"conv_{n}", [{"id": f"fc_{n}", "type": "x"}])
        await conversations.update({**conversation, "metadata": {"n": str(n)}})
        assert (await conversations.get(f"conv_{n}") or {})["metadata"] == {"n": str(n)}
        assert [i["id"] for i in await conversations.items(f"conv_{n}") or []] == [
            f"msg_c{n}",
            f"fc_{n}",
        ]
        assert await conversations.delete_item(f"conv_{n}", f"msg_c{n}")
        assert await conversations.delete(f"conv_{n}")
        assert await conversations.items(f"conv_{n}") is None
    devices = RedisDevices(store)
    token = devices.add("phone")
    devices.add("tablet")
    assert [d.name for d in devices.devices()] == ["phone", "tablet"]
    check = await devices.check(token)
    assert check.status == "ok" and check.name == "phone"
    devices.revoke("phone")
    assert (await devices.check(token)).status == "revoked"
    assert check.digest is not None
    assert await devices.revoked([check.digest]) == {check.digest}
    assert await devices.any_paired()
    controls = RedisControls(store)
    await controls.save(
        "iris:a", Controls(model="m2", show_reasoning=True), "model", "show_reasoning"
    )
    assert (await controls.load("iris:a")).model == "m2"


# -- the tailer per slot ---------------------------------------------------------------------------
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plans)
def test_two_hubs_on_a_cluster_deliver_one_order_with_no_gap_or_duplicate(
    cluster: Cluster, plan: list[tuple[str, str]]
) -> None:
    """The two-process property of the single-node log (each example a chat in another slot)."""
    asyncio.run(check_two_hubs(cluster.url, plan, mode="cluster"))


@contextlib.asynccontextmanager
async def tailed(store: RedisStore) -> AsyncGenerator[Hub]:
    hub = Hub(RedisFrameLog(store, rules=RULES), queue_size=10_000)
    log = hub.log
    assert isinstance(log, RedisFrameLog)
    task = asyncio.create_task(Tailer(store, log, hub).run())
    try:
        yield hub
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await store.aclose()


async def test_the_tailer_follows_chats_on_every_shard_through_a_failover(
    cluster: Cluster, store: RedisStore
) -> None:
    """Frames another process appends to chats on all three primaries reach this process's
    devices in seq order with no gap, before, during and after a failover of one primary."""
    chats = chats_on_every_primary(cluster, store)
    writer = RedisFrameLog(
        RedisStore(cluster.url, mode="cluster", prefix=store.prefix), rules=RULES
    )
    async with tailed(store) as hub:
        subs = {chat: hub.subscribe(chat) for chat in chats}

        def note(chat: str, n: int) -> None:
            writer.sequence(
                chat, {"type": "tool.progress", "index": 1, "name": "t", "note": str(n)}, None
            )

        async def received(upto: int) -> None:
            for chat, sub in subs.items():
                async with asyncio.timeout(20):
                    while not got[chat] or got[chat][-1] < upto:
                        got[chat].append((await sub.get())["seq"])

        got: dict[str, list[int]] = {chat: [] for chat in chats}
        for n in range(5):
            for chat in chats:
                note(chat, n)
        await received(5)
        moved = cluster.node_for(store.chat_key(chats[0], "log"))
        await asyncio.to_thread(cluster.failover, moved)
        for n in range(5, 10):
            for chat in chats:
                for attempt in range(50):  # a write in the failover's instant is retried
                    try:
                        note(chat, n)
                        break
                    except Exception:
                        if attempt == 49:
                            raise
                        await asyncio.sleep(0.1)
        await received(10)
    for chat in chats:
        assert got[chat] == list(range(1, 11)), chat  # in order, once, no gap
    assert cluster.node_for(store.chat_key(chats[0], "log")) is not moved
    writer.store.close()


# -- two iris serve processes on the cluster -------------------------------------------------------
@pytest.fixture
def cluster_store(cluster: Cluster) -> dict[str, Any]:
    """``store`` keys for ``iris serve`` on the cluster (a fresh prefix: a fresh store)."""
    return {"mode": "cluster", "prefix": uuid.uuid4().hex[:12], "lease": 2}


@pytest.fixture
def two_sockets(
    tmp_path: Path, cluster: Cluster, cluster_store: dict[str, Any], upstream: FakeUpstream
) -> Iterator[list[tuple[Served, str]]]:
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        cluster,
        store=cluster_store,
        platforms={"iris": {"enabled": True, "tokens": [TOKEN]}},
        streaming=STREAMING,
        display={"platforms": {"iris": {"buffer_threshold": 1}}},
    ) as running:
        yield [(server, socket_url(url)) for server, url in running]


async def test_a_failover_mid_turn_ends_the_turn_cleanly_and_the_next_message_works(
    two_sockets: list[tuple[Served, str]],
    cluster: Cluster,
    cluster_store: dict[str, Any],
    upstream: FakeUpstream,
) -> None:
    (_, a_url), (_, b_url) = two_sockets
    upstream.script(gated("one ", "two ", "three", after=2), gated("again", after=0))
    on_a, on_b = await device(a_url), await device(b_url)
    await on_a.send({"type": "message.send", "text": "count"})
    await on_b.until("message.update", text="one two ")
    chat_key = f"{cluster_store['prefix']}{{chat:main}}:log"
    await asyncio.to_thread(cluster.failover, cluster.node_for(chat_key))
    upstream.release()
    a_turn, b_turn = chat_frames(await on_a.turn()), chat_frames(await on_b.turn())
    for frames in (a_turn, b_turn):
        # Finished, or ended with an error: either way closed, typing off, in order.
        assert frames[-1] == {**frames[-1], "type": "typing", "on": False}
        assert increasing(frames)
    await on_b.send({"type": "message.send", "text": "next"})
    upstream.release()
    after_a, after_b = chat_frames(await on_a.turn()), chat_frames(await on_b.turn())
    assert [f["type"] for f in after_b if f["type"] == "message.stop"] == ["message.stop"]
    stop = next(f for f in after_b if f["type"] == "message.stop")
    assert stop["final_text"] == "again"
    assert after_a[-1]["seq"] == after_b[-1]["seq"] > b_turn[-1]["seq"]
    await on_a.close()
    await on_b.close()


def test_a_cluster_node_in_single_mode_is_one_line_naming_store_mode(
    tmp_path: Path, cluster: Cluster
) -> None:
    line = refusal(tmp_path, {"url": cluster.url})
    assert "Redis Cluster node" in line and "store.mode: cluster" in line, line


def test_a_plain_redis_in_cluster_mode_and_a_replica_in_single_mode_are_one_line(
    tmp_path: Path, redis_server: RedisServer, cluster: Cluster
) -> None:
    line = refusal(tmp_path, {"url": redis_server.url, "mode": "cluster"})
    assert "not a Redis Cluster node" in line and "store.mode: single" in line, line
    replica_dir = tmp_path / "replica"
    replica_dir.mkdir()
    replica = RedisServer(replica_dir)
    replica.start()
    try:
        client = replica.client()
        client.replicaof("127.0.0.1", redis_server.port)
        client.close()
        line = refusal(tmp_path, {"url": replica.url})
        assert "read-only replica" in line and "store.url" in line, line
    finally:
        replica.kill()


def test_store_nodes_name_the_cluster_and_an_unreachable_one_is_one_line(cluster: Cluster) -> None:
    store = RedisStore(None, mode="cluster", nodes=[n.address for n in cluster.nodes[:2]])
    store.check()
    assert store.sync.set(store.chat_key("n", "probe"), "1")
    store.close()
    with pytest.raises(StoreUnavailable) as caught:
        RedisStore(None, mode="cluster", nodes=[f"127.0.0.1:{free_port()}"], timeout=0.5)
    assert "cannot reach the store" in caught.value.message
    assert "store.url / store.nodes" in caught.value.message

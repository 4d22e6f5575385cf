"""Turn ownership across processes, against a real redis-server: the lease and its registry,
the owner's inbox, the reaper; and two iris servers in one test process sharing one Redis
(each with its own SQLite file): one running turn per chat between them, and a cancel that
lands on the other server reaching the owner."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from iris.fanout.hub import Hub
from iris.fanout.redis_log import RedisFrameLog
from iris.protocol.types import RULES
from iris.state.lease import holder_process
from iris.state.redis_store import RedisStore
from iris.state.turn_owners import TurnOwners, orphaned
from tests.fakes.upstream import FakeUpstream, text
from tests.scale.conftest import RedisServer
from tests.socket import conftest as iris_conftest
from tests.socket.conftest import IrisServer, StartServer
from tests.socket.cut_turns import CUT_TURN

iris_server = iris_conftest.iris_server  # the in-process iris servers, here on one Redis

pytestmark = pytest.mark.timeout(30)

STREAMING = {"enabled": True}


def test_orphans_are_the_registry_entries_no_lease_holds() -> None:
    registry = {"a": "p1/x", "b": "p2/y", "c": "p1/z"}
    holders = {"a": "p1/x", "b": None}  # c: no answer at all, as gone as None
    assert orphaned(registry, holders) == {"b": "p2/y", "c": "p1/z"}
    assert orphaned({}, {}) == {}


async def stopped(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.wait([task])


@pytest.fixture
async def stores(redis_server: RedisServer) -> Any:
    a, b = RedisStore(redis_server.url), RedisStore(redis_server.url)
    yield a, b
    await a.aclose()
    await b.aclose()


async def test_one_process_holds_a_chats_turn_and_the_registry_names_it(
    stores: tuple[RedisStore, RedisStore], redis_server: RedisServer
) -> None:
    a, b = TurnOwners(stores[0], 5), TurnOwners(stores[1], 5)
    lease = a.claim("c1")
    assert lease is not None
    assert b.claim("c1") is None
    assert holder_process(b.holder("c1")) == stores[0].process_id
    assert redis_server.client().hgetall("iris:turns") == {"c1": lease.token}

    b_lease = b.claim("c2")  # another chat: its own lease
    assert b_lease is not None
    b.release("c1", b_lease)  # not c1's holder: changes nothing
    assert a.holder("c1") == lease.token

    a.release("c1", lease)
    assert a.holder("c1") is None
    assert redis_server.client().hgetall("iris:turns") == {"c2": b_lease.token}
    assert b.claim("c1") is not None


async def test_a_turn_not_closed_stays_registered_after_its_lease_is_released(
    stores: tuple[RedisStore, RedisStore], redis_server: RedisServer
) -> None:
    a = TurnOwners(stores[0], 5)
    lease = a.claim("c1")
    assert lease is not None
    a.release("c1", lease, done=False)
    assert a.holder("c1") is None
    assert redis_server.client().hgetall("iris:turns") == {"c1": lease.token}
    assert await a.orphans() == {"c1": lease.token}
    await a.forget("c1", "someone/else")  # only the token it names
    assert await a.orphans() == {"c1": lease.token}
    await a.forget("c1", lease.token)
    assert await a.orphans() == {}


async def test_the_reaper_hands_over_a_chat_whose_owner_stopped_renewing(
    stores: tuple[RedisStore, RedisStore],
) -> None:
    dead, survivor = TurnOwners(stores[0], 1), TurnOwners(stores[1], 1)
    assert dead.claim("c1") is not None  # and never renewed: its process was killed
    assert TurnOwners(stores[1], 30).claim("c2") is not None  # a live turn: never handed over
    handed = asyncio.Event()
    seen: list[str] = []

    def recover(chat_id: str) -> None:
        seen.append(chat_id)
        handed.set()

    reaper = asyncio.create_task(survivor.reap(recover))
    try:
        await asyncio.wait_for(handed.wait(), timeout=5)
    finally:
        await stopped(reaper)
    assert seen == ["c1"]
    assert await survivor.orphans() == {}  # the entry is forgotten once dealt with


async def test_a_cancel_reaches_the_owners_inbox_with_the_lease_it_was_for(
    stores: tuple[RedisStore, RedisStore],
) -> None:
    owner, other = TurnOwners(stores[0], 5), TurnOwners(stores[1], 5)
    lease = owner.claim("c1")
    assert lease is not None
    got: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    listener = asyncio.create_task(owner.listen(lambda chat, token: got.put_nowait((chat, token))))
    try:
        token = other.holder("c1")
        assert token is not None
        other.ask_cancel("c1", token)
        assert await asyncio.wait_for(got.get(), timeout=5) == ("c1", lease.token)
    finally:
        await stopped(listener)


# -- two servers, one Redis ------------------------------------------------------------------


async def two_servers(
    iris_server: StartServer, redis_server: RedisServer, tmp_path: Path, **sections: Any
) -> tuple[IrisServer, IrisServer]:
    servers: list[IrisServer] = []
    for name in ("a", "b"):
        store = {"path": str(tmp_path / f"{name}.db"), "url": redis_server.url, "lease": 2}
        servers.append(await iris_server(streaming=STREAMING, store=store, **sections))
    return servers[0], servers[1]


async def test_a_plain_send_on_the_other_server_while_a_turn_runs_is_turn_active(
    redis_server: RedisServer, iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    a, b = await two_servers(iris_server, redis_server, tmp_path)
    upstream.script(text("Hel", "lo", gate_after=1), text("again"))
    on_a, on_b = await a.connect(), await b.connect()
    await on_a.send({"type": "message.send", "text": "hi"})
    await on_a.until("message.start")
    await asyncio.to_thread(upstream.gate_reached.wait, 5)

    await on_b.send({"type": "message.send", "text": "me too"})
    refused = await on_b.until("error")
    assert refused[-1]["code"] == "turn_active"
    await on_b.send({"type": "message.send", "text": "/status"})
    status = await on_b.until("command")
    assert "reply running: yes" in status[-1]["text"]

    upstream.release()
    ended_a, ended_b = await on_a.turn(), await on_b.turn()  # one log: both see A's turn end
    assert ended_a[-1]["seq"] == ended_b[-1]["seq"]
    # The turn's last frames are out: the lease is free, the other server runs the next turn.
    await on_b.send({"type": "message.send", "text": "me too"})
    frames = await on_b.turn()
    stop = next(f for f in frames if f["type"] == "message.stop")
    assert stop["final_text"] == "again"


@pytest.mark.parametrize("how", ["turn.cancel", "/stop"])
async def test_a_cancel_on_the_other_server_interrupts_the_turn_where_it_runs(
    redis_server: RedisServer,
    iris_server: StartServer,
    upstream: FakeUpstream,
    tmp_path: Path,
    how: str,
) -> None:
    a, b = await two_servers(iris_server, redis_server, tmp_path)
    upstream.script(text("Hel", "lo", gate_after=1))
    on_a, on_b = await a.connect(), await b.connect()
    await on_a.send({"type": "message.send", "text": "hi"})
    await on_a.until("message.update")
    await asyncio.to_thread(upstream.gate_reached.wait, 5)

    if how == "/stop":
        await on_b.send({"type": "message.send", "text": "/stop"})
        answer = await on_b.until("command")
        assert answer[-1]["text"] == "stopped"
    else:
        await on_b.send({"type": "turn.cancel"})

    for device in (on_a, on_b):  # the turn ends as interrupted on the devices of both
        frames = await device.turn()
        stop = next(f for f in frames if f["type"] == "message.stop")
        assert stop["final_text"] == "Hel"  # where it was: the held delta never came
    assert on_a.frames[-1]["seq"] == on_b.frames[-1]["seq"]
    assert not any(f["type"] == "error" and "seq" not in f for f in on_b.frames)  # no no_turn
    await asyncio.to_thread(upstream.disconnected.wait, 5)  # the upstream was closed


async def test_a_cancel_meant_for_an_earlier_turn_leaves_the_next_one_alone(
    redis_server: RedisServer, iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    a, _ = await two_servers(iris_server, redis_server, tmp_path)
    upstream.script(text("o", "ne", gate_after=1), text("Hel", "lo", gate_after=1))
    on_a = await a.connect()
    owners = a.surface.owners
    assert owners is not None
    await on_a.send({"type": "message.send", "text": "first"})
    await asyncio.to_thread(upstream.gate_reached.wait, 5)
    earlier = owners.holder("main")
    upstream.release()
    await on_a.turn()
    upstream.reset_gate()
    await on_a.send({"type": "message.send", "text": "second"})
    await asyncio.to_thread(upstream.gate_reached.wait, 5)
    assert earlier is not None and owners.holder("main") not in (None, earlier)
    room = a.surface.rooms["main"]
    asked = asyncio.Event()
    act = room.cancel_held

    def cancel_held(token: str) -> None:
        act(token)
        asked.set()

    room.cancel_held = cancel_held  # to see when the inbox has been read
    owners.ask_cancel("main", earlier)  # late: that turn is over
    await asyncio.wait_for(asked.wait(), timeout=5)

    upstream.release()
    frames = await on_a.turn()
    stop = next(f for f in frames if f["type"] == "message.stop")
    assert stop["final_text"] == "Hello"


@pytest.mark.parametrize("found_by", ["renewal", "fence"])
async def test_a_turn_that_loses_its_lease_stops_and_the_reaper_closes_it_once(
    redis_server: RedisServer,
    iris_server: StartServer,
    upstream: FakeUpstream,
    tmp_path: Path,
    found_by: str,
) -> None:
    a, _ = await two_servers(iris_server, redis_server, tmp_path)
    upstream.script(text("Hel", "lo", gate_after=1))
    on_a = await a.connect()
    await on_a.send({"type": "message.send", "text": "hi"})
    await on_a.until("message.update")
    await asyncio.to_thread(upstream.gate_reached.wait, 5)
    # Another process takes the lease over (as after a long pause of this one), then dies.
    redis_server.client().set("iris{chat:main}:turn", "elsewhere:1:x/y", px=2500)

    if found_by == "fence":  # the reply ends at once: its last frames meet the fence
        upstream.release()
        await asyncio.to_thread(upstream.finished.wait, 5)
    else:  # the reply is held: the lease's renewal finds it lost and the turn stops
        await asyncio.to_thread(upstream.disconnected.wait, 5)
    frames = await on_a.turn(within=10)  # closed by the reaper once that lease ran out
    closing = [f for f in frames if f["type"] in ("message.stop", "error", "typing")]
    assert [f["type"] for f in closing] == ["message.stop", "error", "typing"]
    assert closing[0]["final_text"] == "Hel"
    assert closing[1]["code"] == "owner_lost"
    await on_a.send({"type": "ping"})
    later = await on_a.until("pong")
    assert [f["type"] for f in later] == ["pong"]  # nothing more: closed once

    # The chat goes on; the model's history holds the shown text once, marked interrupted.
    upstream.script(text("blue."))
    await on_a.send({"type": "message.send", "text": "go on"})
    await on_a.turn()
    sent = upstream.requests[-1].body["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "hi"),
        ("assistant", "Hel\n\n[interrupted]"),
        ("user", "go on"),
    ]


async def test_startup_leaves_a_turn_a_live_process_owns_and_closes_it_when_that_one_dies(
    redis_server: RedisServer, iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    # A turn another process runs: its frames are in the shared log; it holds the lease and is
    # alive (for 2.5 s: then it "dies").
    store = RedisStore(redis_server.url)
    Hub(RedisFrameLog(store, rules=RULES)).publish_all("main", CUT_TURN)
    await store.aclose()
    owner = "elsewhere:1:x/y"
    client = redis_server.client()
    client.set("iris{chat:main}:turn", owner, px=2500)
    client.hset("iris:turns", "main", owner)
    a, _ = await two_servers(iris_server, redis_server, tmp_path)
    device = await a.connect(after_seq=0)
    replay = await device.until("message.update")
    await device.send({"type": "ping"})
    assert [f["type"] for f in await device.until("pong")] == ["pong"]  # left open
    assert not any(f["type"] == "typing" and not f["on"] for f in replay)

    frames = await device.turn(within=10)
    stop = next(f for f in frames if f["type"] == "message.stop")
    assert stop["final_text"] == "The sky is bl"
    assert any(f["type"] == "error" and f["code"] == "owner_lost" for f in frames)

"""What one device can cost the server: every frame kind stays within the queue bound, a flood
is cut off, and a device closed for either comes back with nothing missed."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from iris.fanout.subscription import Subscription
from iris.surfaces.socket.flood import FrameBucket
from tests.fakes.upstream import FakeUpstream, gated, text
from tests.socket.conftest import Device, IrisServer, StartServer

STREAMING = {"enabled": True}


@pytest.fixture
def no_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lift the inbound budget, to see what the queue alone does with a flood."""
    monkeypatch.setattr("iris.surfaces.socket.endpoint.INBOUND_BURST", 1_000_000)


def subscription_of(server: IrisServer, chat_id: str = "main") -> list[Subscription]:
    return server.surface.hub.subscriptions(chat_id)


async def frozen(server: IrisServer) -> Device:
    """A device whose app froze: it sends, but its socket fills up and it reads nothing."""
    device = await server.connect(receive_buffer=4096)
    device.ws.transport.pause_reading()
    return device


async def drain(device: Device) -> list[dict[str, Any]]:
    """Let a frozen device read again: everything it is sent until the server closes it."""
    device.ws.transport.resume_reading()
    await device.closed(within=20.0)
    return device.frames


async def barrier(device: Device) -> list[dict[str, Any]]:
    """Let a frozen device read again, up to the answer to a frame sent now: every frame it
    sent before has been handled by then."""
    await device.send({"type": "turn.cancel"})
    device.ws.transport.resume_reading()
    return await device.until("error", within=20.0, code="no_turn")


async def test_pongs_for_a_device_that_never_reads_coalesce(
    iris_server: StartServer, no_budget: None
) -> None:
    server = await iris_server(iris={"queue_size": 8})
    device = await frozen(server)
    for _ in range(20_000):  # ~800 KB of pongs: far more than the socket buffers hold
        await device.send({"type": "ping"})
    frames = await barrier(device)
    (subscription,) = subscription_of(server)
    assert subscription.high_water <= 8
    pongs = sum(f["type"] == "pong" for f in frames)
    assert 1 <= pongs < 5_000  # it was one per ping; now what the buffers held, plus one


async def test_a_repeated_resume_replaces_the_waiting_sync(
    iris_server: StartServer, upstream: FakeUpstream, no_budget: None
) -> None:
    upstream.script(text("y" * 50_000))
    server = await iris_server(iris={"queue_size": 8})
    writer = await server.connect()
    await writer.send({"type": "message.send", "text": "a long answer please"})
    latest = (await writer.turn())[-1]["seq"]
    device = await frozen(server)
    for _ in range(200):  # each answered by a sync of the whole conversation (50 KB)
        await device.send({"type": "resume", "after_seq": latest + 100})
    frames = await barrier(device)
    syncs = [f for f in frames if f["type"] == "sync"]
    assert 1 <= len(syncs) <= 5  # those the socket buffers took, and one waiting
    assert syncs[-1]["messages"][-1]["text"] == "y" * 50_000
    assert all(s.high_water <= 8 for s in subscription_of(server))


async def test_a_device_over_its_bound_is_closed_with_4008_and_resumes_without_a_gap(
    iris_server: StartServer, upstream: FakeUpstream, no_budget: None
) -> None:
    upstream.script(gated(*[f"part{n} " for n in range(40)], after=1))
    server = await iris_server(
        streaming=STREAMING,
        iris={"queue_size": 8},
        display={"platforms": {"iris": {"buffer_threshold": 1}}},
    )
    writer = await server.connect()
    device = await frozen(server)
    await writer.send({"type": "message.send", "text": "go"})
    await writer.until("message.update")
    wrong = {"type": "message.send", "text": "hi", "chat_id": "elsewhere"}
    for _ in range(20_000):  # each answered by an error (wrong_chat) it never reads
        await device.send(wrong)
    seen = await drain(device)
    assert device.ws.close_code == 4008
    assert all(s.high_water <= 8 for s in subscription_of(server))
    assert len(subscription_of(server)) == 1  # only the writer's is left

    upstream.release()  # the turn goes on while the device is away
    on_writer = await writer.turn(within=20.0)
    last = max(f["seq"] for f in seen)
    back = await server.connect(after_seq=last)
    rest = await back.turn()
    got = {f["seq"] for f in seen + rest}
    missing = [f for f in on_writer if f["type"] != "message.update" and f["seq"] not in got]
    assert missing == []  # every frame that matters, before the close or in the replay
    assert rest[-2]["final_text"] == on_writer[-2]["final_text"]
    assert increasing(rest)


async def test_a_flood_gets_one_rate_limited_error_then_4029(iris_server: StartServer) -> None:
    server = await iris_server()
    device = await server.connect()
    for _ in range(500):
        await device.send({"type": "ping"})
    frames = await drain(device)
    assert device.ws.close_code == 4029
    assert [f["code"] for f in frames if f["type"] == "error"] == ["rate_limited"]
    assert 1 <= sum(f["type"] == "pong" for f in frames) <= 101 + 20  # the burst (+ refills)
    again = await server.connect()  # other connections are untouched
    await again.send({"type": "ping"})
    assert (await again.recv())["type"] == "pong"


def test_the_budget_allows_a_burst_then_its_rate() -> None:
    budget = FrameBucket(rate=20.0, burst=100)
    assert all(budget.take(0.0) for _ in range(100))
    assert not budget.take(0.0) and not budget.take(0.01) and budget.over == 2
    assert budget.take(0.05) and budget.over == 0  # 1/20 s later: one more frame
    assert not budget.take(0.05)
    assert all(budget.take(10.0) for _ in range(100))  # a quiet spell refills up to the burst
    assert not budget.take(10.0)


def increasing(frames: list[dict[str, Any]]) -> bool:
    return all(a["seq"] < b["seq"] for a, b in itertools.pairwise(frames))

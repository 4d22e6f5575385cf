"""Stored data shared by two ``iris serve`` processes on one Redis: a stored response continued
through the other process, a chat's history written by one and read by the other, and a device
paired by ``iris devices add`` accepted, then revoked, on both. Each process keeps its own
SQLite file, so only Redis can carry any of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from iris.private import write_private
from tests.fakes.upstream import FakeUpstream, text
from tests.scale.processes import TOKEN, Process
from tests.socket.pairing import iris, pair

pytestmark = pytest.mark.timeout(90)


def sent(upstream: FakeUpstream) -> list[tuple[str, Any]]:
    return [(m["role"], m["content"]) for m in upstream.requests[-1].body["messages"]]


def test_a_response_stored_through_a_is_continued_through_b(
    upstream: FakeUpstream, processes: tuple[Process, Process]
) -> None:
    a, b = processes
    upstream.script(text("Blue."), text("Yes, blue."))
    with a.client() as on_a, b.client() as on_b:
        first = on_a.responses.create(model="fake-model", input="sky?")
        assert on_b.responses.retrieve(first.id).output_text == "Blue."
        second = on_b.responses.create(
            model="fake-model", input="sure?", previous_response_id=first.id
        )
        assert sent(upstream) == [("user", "sky?"), ("assistant", "Blue."), ("user", "sure?")]
        assert on_a.responses.retrieve(second.id).output_text == "Yes, blue."
        # An output item made on A is referenced on B.
        upstream.script(text("Noted."))
        message = first.output[0]
        referenced: Any = [{"type": "item_reference", "id": message.id}]
        on_b.responses.create(
            model="fake-model", input=[*referenced, {"role": "user", "content": "ok"}]
        )
        assert sent(upstream) == [("assistant", "Blue."), ("user", "ok")]


async def test_a_chats_history_written_on_a_is_read_on_b(
    upstream: FakeUpstream, processes: tuple[Process, Process]
) -> None:
    a, b = processes
    upstream.script(text("Paris, then Rome."), text("About 900 euros."))
    on_a = await a.device(TOKEN, chat_id="trip")
    await on_a.send({"type": "message.send", "text": "plan the trip"})
    await on_a.turn()
    await on_a.close()

    async with httpx.AsyncClient(base_url=b.url) as client:
        listed = await client.get("/iris/chats", headers={"Authorization": f"Bearer {TOKEN}"})
    assert listed.status_code == 200
    assert [(c["chat_id"], c["title"]) for c in listed.json()["chats"]] == [
        ("trip", "plan the trip")
    ]

    on_b = await b.device(TOKEN, chat_id="trip")
    await on_b.send({"type": "message.send", "text": "and the budget"})
    await on_b.turn()
    assert sent(upstream)[-3:] == [
        ("user", "plan the trip"),
        ("assistant", "Paris, then Rome."),
        ("user", "and the budget"),
    ]
    await on_b.close()


async def test_a_device_paired_once_is_accepted_by_both_and_a_revoke_reaches_both(
    processes: tuple[Process, Process],
) -> None:
    a, b = processes
    token = await pair(a.config, "phone")

    connected = [await a.device(token), await b.device(token)]
    for device in connected:
        await device.send({"type": "ping"})
        assert (await device.recv())["type"] == "pong"
    listed = await iris(b.config, "devices", "list")  # b's config: the same Redis
    assert listed.code == 0 and listed.out.splitlines()[1].split()[0] == "phone"
    assert not listed.out.splitlines()[1].endswith("never")  # seen by a server

    revoked = await iris(b.config, "devices", "revoke", "phone")
    assert revoked.code == 0, revoked.err
    # Each process finds the revocation by itself (REVOCATION_POLL, 5 s): a hang guard here.
    for device in connected:
        assert await device.closed(within=20) == 4401
        assert device.ws.close_reason == "revoked"
    for process in (a, b):
        refused = await process.device(token, ready=False)
        assert await refused.closed() == 4401 and refused.ws.close_reason == "revoked"
    assert "phone" not in (await iris(a.config, "devices", "list")).out


def test_iris_devices_with_an_unreachable_redis_says_so_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    store = {"path": str(tmp_path / "iris.db"), "url": "redis://127.0.0.1:1/0"}
    write_private(config, yaml.safe_dump({"store": store}))
    done = subprocess.run(
        [sys.executable, "-m", "iris.cli", "devices", "list", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the store" in lines[0], done.stderr

"""Stored data shared by two ``iris serve`` processes on one Redis: a stored response continued
through the other process, a chat's history written by one and read by the other, and a device
paired by ``iris devices add`` accepted, then revoked, on both. Each process keeps its own
SQLite file, so only Redis can carry any of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from iris.private import write_private
from tests.fakes.upstream import FakeUpstream, text
from tests.scale.across import (
    a_device_paired_once_is_accepted_by_both_and_a_revoke_reaches_both,
    a_response_stored_through_a_is_continued_through_b,
    sent,
)
from tests.scale.processes import TOKEN, Process

pytestmark = pytest.mark.timeout(90)


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


def test_a_response_stored_through_a_is_continued_through_b(
    upstream: FakeUpstream, processes: tuple[Process, Process]
) -> None:
    a_response_stored_through_a_is_continued_through_b(upstream, processes)


async def test_a_device_paired_once_is_accepted_by_both_and_a_revoke_reaches_both(
    processes: tuple[Process, Process],
) -> None:
    await a_device_paired_once_is_accepted_by_both_and_a_revoke_reaches_both(processes)

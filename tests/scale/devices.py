"""Devices on the iris socket of iris serve processes that share Redis, and what their frames must show, for the multi-process tests."""

from __future__ import annotations

import itertools
from typing import Any

from websockets.asyncio.client import connect

from tests.socket.conftest import TOKEN, WAIT, Device

STREAMING: dict[str, Any] = {"enabled": True}


async def device(url: str, after_seq: int | None = None) -> Device:
    ws = await connect(url, open_timeout=WAIT)
    dev = Device(ws)
    hello: dict[str, Any] = {"type": "hello", "token": TOKEN}
    if after_seq is not None:
        hello["after_seq"] = after_seq
    await dev.send(hello)
    assert (await dev.recv())["type"] == "ready"
    return dev


def chat_frames(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat-scoped frames (connection-scoped ones repeat the last seq)."""
    return [f for f in frames if f["type"] not in ("ready", "pong", "sync", "command")]


def increasing(frames: list[dict[str, Any]]) -> bool:
    return all(a["seq"] < b["seq"] for a, b in itertools.pairwise(frames))


def essential(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What no device may miss: everything but superseded snapshots."""
    return [f for f in frames if f["type"] != "message.update"]

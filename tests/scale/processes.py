"""iris serve processes on one shared store, as the data tests start them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openai import OpenAI
from websockets.asyncio.client import connect

from tests.fakes.served import Served
from tests.socket.conftest import Device

TOKEN = "config-token-0123456789"  # the iris socket's token of both processes


@dataclass
class Process:
    served: Served
    url: str
    config: Path

    @property
    def ws(self) -> str:
        return self.url.replace("http://", "ws://") + "/iris/ws"

    def client(self) -> OpenAI:
        return OpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0, timeout=10)

    async def device(self, token: str, *, chat_id: str | None = None, ready: bool = True) -> Device:
        device = Device(await connect(self.ws, open_timeout=10))
        hello: dict[str, Any] = {"type": "hello", "token": token}
        if chat_id is not None:
            hello["chat_id"] = chat_id
        await device.send(hello)
        if ready:
            frame = await device.recv()
            assert frame["type"] == "ready", frame
        return device


async def until_async(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait (10 s at most: a hang guard) until ``check`` holds."""
    try:
        async with asyncio.timeout(10):
            while True:
                if await check():
                    return
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None

"""A Telegram bot served by processes that share Redis: its fake Bot API, its config and what the chat shows."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

from tests.fakes.served import Served, serve
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream
from tests.scale.conftest import Shared

CHAT, USER = 42, 7


def telegram(api: FakeBotApi, via: str) -> dict[str, Any]:
    return {
        "telegram": {
            "enabled": True,
            "token": api.token,
            "base_url": api.base_url_for(via),
            "allowed_users": [USER],
            "poll_timeout": 1,
        }
    }


def said(api: FakeBotApi, words: str) -> bool:
    return any(words in message for message in api.chat(CHAT))


@contextlib.asynccontextmanager
async def bot_servers(
    tmp_path: Path,
    upstream: FakeUpstream,
    redis_server: Shared,
    api: FakeBotApi,
    lease: int,
    store_keys: dict[str, Any] | None = None,
) -> AsyncGenerator[Callable[[str], Awaitable[Served]]]:
    """``start(name)`` runs an ``iris serve`` for the bot, reaching the fake as ``name``
    (``store_keys``: more ``store`` keys, e.g. ``mode``)."""
    servers: list[Served] = []

    async def start(name: str) -> Served:
        store = {
            "url": redis_server.url,
            "path": str(tmp_path / f"{name}.db"),
            "lease": lease,
            **(store_keys or {}),
        }
        server, _ = await asyncio.to_thread(
            serve,
            tmp_path,
            upstream.base_url,
            name=f"{name}.yaml",
            store=store,
            platforms=telegram(api, name),
        )
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()

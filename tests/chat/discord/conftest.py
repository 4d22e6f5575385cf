"""The Discord fakes every Discord test here runs against: the REST API and the gateway, with
discord.py pointed at both."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.discord_api import DiscordAPI
from tests.fakes.discord_gateway import DiscordGateway, point_discord_py_at


@pytest.fixture
async def api() -> AsyncIterator[DiscordAPI]:
    async with DiscordAPI() as fake:
        yield fake


@pytest.fixture
async def gateway(
    api: DiscordAPI, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[DiscordGateway]:
    async with DiscordGateway(token=api.token) as fake:
        point_discord_py_at(monkeypatch, api, fake)
        yield fake

"""The Matrix tests' bot config against the test Synapse, and a gateway running it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any

from iris.config import Config
from iris.surfaces.chat.platforms.matrix import MatrixPlatform
from iris.surfaces.chat.platforms.matrix_api import JSON
from iris.surfaces.chat.runner import ChatSurface
from tests.chat.harness import STREAMING, running
from tests.chat.matrix.synapse import Person, Synapse
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream

# Loose enough that only the rate-limit test meets Synapse's limit.
BUDGETS = {"bot": {"calls": 50, "per": 1.0}, "room": {"calls": 4, "per": 1.0}}


def matrix_config(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    allowed: list[str],
    **extra: Any,
) -> Config:
    settings = {
        "homeserver": synapse.url,
        "user_id": bot[0],
        "access_token": bot[1],
        "allowed_users": allowed,
        "sync_timeout": 5,
        "budgets": BUDGETS,
        **extra.pop("matrix", {}),
    }
    extra.setdefault("display", {"platforms": {"matrix": {"transport": "edit"}}})
    extra.setdefault("tools", {"enabled": []})
    extra.setdefault("streaming", STREAMING)
    platforms = {"api_server": {"enabled": False}, "iris": {"enabled": False}}
    return make_config(
        upstream.base_url, platforms={**platforms, "matrix": {"enabled": True, **settings}}, **extra
    )


@contextlib.asynccontextmanager
async def gateway(config: Config) -> AsyncGenerator[tuple[ChatSurface, MatrixPlatform]]:
    """The chat surface on Matrix, its first sync done."""
    async with running(config) as surface:
        (platform,) = surface.platforms
        assert isinstance(platform, MatrixPlatform)
        await platform.synced.wait()
        yield surface, platform


async def joined(person: Person, room_id: str, user_id: str) -> None:
    """Until ``person`` saw ``user_id`` join ``room_id``."""

    def seen() -> bool:
        return any(
            event.get("type") == "m.room.member"
            and event.get("state_key") == user_id
            and event.get("content", {}).get("membership") == "join"
            for event in person.from_user(user_id, room_id)
        )

    await person.wait_until(seen)


def messages(person: Person, room_id: str, bot: str) -> list[JSON]:
    """The bot's ``m.room.message`` events in ``room_id`` as ``person`` saw them."""
    return [e for e in person.from_user(bot, room_id) if e.get("type") == "m.room.message"]

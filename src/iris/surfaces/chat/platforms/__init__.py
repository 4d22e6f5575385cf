"""The chat platforms: one adapter per platform over its real client library, and their base;
``build_platforms`` makes the adapters of the platforms the config enables."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import cast

from iris.config import Config
from iris.surfaces.chat.platforms.base import ChatPlatform, PlatformError

log = logging.getLogger(__name__)

PlatformFactory = Callable[[Config], ChatPlatform]


def _adapter(module: str, cls: str) -> PlatformFactory:
    # Imported when enabled only: each adapter pulls in its platform's client library.
    def build(config: Config) -> ChatPlatform:
        adapter = getattr(importlib.import_module(f"iris.surfaces.chat.platforms.{module}"), cls)
        return cast(ChatPlatform, adapter(getattr(config.platforms, module)))

    return build


def _matrix(config: Config) -> ChatPlatform:
    # Its sync token is kept beside the database, in Iris's private files.
    from iris.surfaces.chat.platforms.matrix import MatrixPlatform

    folder = config.store.resolved_path().parent / "matrix"
    return cast(ChatPlatform, MatrixPlatform(config.platforms.matrix, folder))


PLATFORMS: dict[str, PlatformFactory] = {
    "telegram": _adapter("telegram", "TelegramPlatform"),
    "discord": _adapter("discord", "DiscordPlatform"),
    "slack": _adapter("slack", "SlackPlatform"),
    "whatsapp": _adapter("whatsapp", "WhatsAppPlatform"),
    "matrix": _matrix,
    "homeassistant": _adapter("homeassistant", "HomeAssistantPlatform"),
}


def build_platforms(config: Config) -> list[ChatPlatform]:
    """One adapter per enabled platform, in ``PLATFORMS`` order.

    A platform that cannot be built (say, an empty token) is logged and left out: one bad
    platform section must not take the other surfaces of the server down with it."""
    platforms: list[ChatPlatform] = []
    for name, build in PLATFORMS.items():
        if not getattr(config.platforms, name).enabled:
            continue
        try:
            platforms.append(build(config))
        except (PlatformError, ImportError) as exc:
            log.error("chat platform %s not started: %s", name, exc)
    return platforms

"""The chat gateway with the real agent and the fake upstream, on a recording platform."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from iris.config import Config
from iris.runtime import Runtime
from iris.surfaces.chat.runner import ChatSurface
from tests.conftest import MakeConfig
from tests.fakes.recording_platform import RecordingPlatform
from tests.fakes.upstream import FakeUpstream

Gateway = Callable[..., Any]


@pytest.fixture
async def gateway(
    make_config: MakeConfig, upstream: FakeUpstream
) -> AsyncIterator[Callable[..., Any]]:
    """``await gateway(allowed=[7], telegram={...}, **config_sections)``: a started
    ``ChatSurface`` on a ``RecordingPlatform`` (Telegram), and the platform."""
    surfaces: list[tuple[ChatSurface, Runtime]] = []

    async def start(
        allowed: list[Any] | None = None, telegram: dict[str, Any] | None = None, **sections: Any
    ) -> tuple[ChatSurface, RecordingPlatform]:
        config: Config = make_config(
            upstream.base_url,
            streaming={"enabled": True, "min_tokens": 2, "edit_interval": 0.05},
            platforms={
                "telegram": {
                    "enabled": True,
                    "token": "1:x",
                    "allowed_users": [7] if allowed is None else allowed,
                    **(telegram or {}),
                }
            },
            **sections,
        )
        runtime = Runtime.create(config)
        platform = RecordingPlatform()
        surface = ChatSurface(runtime, platforms=[platform])
        await surface.start()
        surfaces.append((surface, runtime))
        return surface, platform

    yield start
    for surface, runtime in surfaces:
        await surface.stop()
        await runtime.agent.aclose()
        runtime.store.close()

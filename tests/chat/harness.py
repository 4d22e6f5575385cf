"""A chat platform's test config and a running ``ChatSurface``, shared by the adapter e2e tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from iris.config import Config
from iris.runtime import Runtime
from iris.surfaces.chat.platforms.base import ChatPlatform
from iris.surfaces.chat.runner import ChatSurface
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream

# Fast enough for a test, slow enough that a reply is one send plus a few edits.
STREAMING = {"enabled": True, "min_tokens": 3, "edit_interval": 0.5}


def platform_config(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    platform: str,
    settings: dict[str, Any],
    **sections: Any,
) -> Config:
    """Only ``platform`` enabled (no API server, no iris socket, no agent tools).

    No ``debounce`` unless ``settings`` gives one: a test's next message, sent as soon as the
    reply came, would otherwise wait out the default 1.5 s of quiet each time. The tests of
    bursts (an album, a flood) set it."""
    return make_config(
        upstream.base_url,
        streaming=STREAMING,
        platforms={
            "api_server": {"enabled": False},
            "iris": {"enabled": False},
            platform: {"enabled": True, "debounce": 0, **settings},
        },
        **{"tools": {"enabled": []}, **sections},
    )


@contextlib.asynccontextmanager
async def running(
    config: Config, platforms: Sequence[ChatPlatform] | None = None
) -> AsyncIterator[ChatSurface]:
    """``iris serve``'s chat surface for ``config``, started, and stopped on exit."""
    runtime = Runtime.create(config)
    surface = ChatSurface(runtime, None if platforms is None else list(platforms))
    await runtime.agent.start_tools()  # the MCP servers, as iris serve's lifespan starts them
    await surface.start()
    try:
        yield surface
    finally:
        await surface.stop()
        await runtime.agent.aclose()
        runtime.store.close()

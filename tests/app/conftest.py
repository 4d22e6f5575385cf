"""Fixtures for the app's tests: a scripted iris server on 127.0.0.1, and the real one (the
real agent on the fake OpenAI upstream, the real iris socket)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from iris.server.asgi import UVICORN_WS_OPTIONS, build_app
from tests.conftest import MakeConfig
from tests.fakes import loopback
from tests.fakes.iris_server import FakeIrisServer
from tests.fakes.upstream import FakeUpstream


@pytest.fixture
async def server() -> AsyncIterator[FakeIrisServer]:
    async with FakeIrisServer() as running:
        yield running


@pytest.fixture(params=[False])
async def iris_url(
    request: pytest.FixtureRequest, make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> AsyncIterator[str]:
    """The server's URL; parametrize indirectly with True to stream replies to the app."""
    config = make_config(
        upstream.base_url,
        platforms={
            "iris": {"tokens": ["device-token-0123456789"]},
            "api_server": {"enabled": False},
        },
        display={"platforms": {"iris": {"show_reasoning": True}}},
        tools={"terminal": {"cwd": str(tmp_path)}},
        streaming={"enabled": request.param},
    )
    (tmp_path / "notes.txt").write_text("x")
    sock = loopback.bind()
    server = await loopback.start(build_app(config), sock, **UVICORN_WS_OPTIONS)
    yield f"ws://127.0.0.1:{sock.getsockname()[1]}/iris/ws"
    await loopback.stop(server)

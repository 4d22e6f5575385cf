"""Iris's server on a real socket for API tests: ``iris_server(**config)`` → base URL.

The server runs in its own thread and event loop (like the fake upstream), so sync openai
clients, async clients and raw sockets can all talk to it over 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from iris.config import Config
from iris.server.asgi import build_app
from tests.conftest import MakeConfig
from tests.fakes import loopback
from tests.fakes.upstream import FakeUpstream


class IrisServer:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.app = build_app(config)
        self._sock = loopback.bind()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="iris-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def port(self) -> int:
        return self._sock.getsockname()[1]

    def start(self) -> IrisServer:
        self._thread.start()
        assert self._ready.wait(10), "iris server did not start"
        if self._error is not None:
            raise RuntimeError("iris server failed to start") from self._error
        return self

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        assert not self._thread.is_alive(), "iris server thread did not stop"
        self._sock.close()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await loopback.start(self.app, self._sock)
        self._ready.set()
        await self._stop.wait()
        await loopback.stop(server)


StartIris = Callable[..., IrisServer]


@pytest.fixture
def iris_server(make_config: MakeConfig, upstream: FakeUpstream) -> Iterator[StartIris]:
    """``iris_server(**sections)``: Iris pointed at the fake upstream, serving the API only."""
    servers: list[IrisServer] = []

    def start(**sections: Any) -> IrisServer:
        platforms = {"iris": {"enabled": False}, **sections.pop("platforms", {})}
        config = make_config(upstream.base_url, platforms=platforms, **sections)
        server = IrisServer(config).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()

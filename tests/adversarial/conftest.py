"""The adversarial suite: each finding of the hardening review replayed against the real
``iris serve`` (a subprocess), with raw sockets and the SDKs, as an attacker or a faulty
network would. A test here fails when the finding regresses."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.served import Served, serve
from tests.fakes.upstream import FakeUpstream

StartServed = Callable[..., tuple[Served, str]]


@pytest.fixture
def served(tmp_path: Path, upstream: FakeUpstream) -> Iterator[StartServed]:
    """``served(**sections)``: ``iris serve`` on a free port against the scripted upstream;
    returns the process and its base URL. Stopped (kill) at the end of the test."""
    started: list[Served] = []

    def start(**sections: Any) -> tuple[Served, str]:
        server, url = serve(tmp_path, upstream.base_url, **sections)
        started.append(server)
        return server, url

    yield start
    for server in started:
        server.stop()

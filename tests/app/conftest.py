"""Fixtures for the app's tests: a scripted iris server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.iris_server import FakeIrisServer


@pytest.fixture
async def server() -> AsyncIterator[FakeIrisServer]:
    async with FakeIrisServer() as running:
        yield running

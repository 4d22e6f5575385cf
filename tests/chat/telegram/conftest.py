"""The fake Bot API every Telegram test here runs against."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.telegram_api import FakeBotApi


@pytest.fixture
async def api() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi() as fake:
        yield fake

"""The fake Slack Web API and Socket Mode every Slack test here runs against."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.slack_api import SlackAPI


@pytest.fixture
async def api() -> AsyncIterator[SlackAPI]:
    async with SlackAPI() as fake:
        yield fake

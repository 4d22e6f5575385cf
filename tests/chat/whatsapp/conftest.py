"""The Cloud API stand-in every WhatsApp test here runs against."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.whatsapp_api import WhatsAppAPI


@pytest.fixture
async def api() -> AsyncIterator[WhatsAppAPI]:
    # No pair limit: a test of the pair limit overrides this with Meta's pace.
    async with WhatsAppAPI(pair_every=0.0) as fake:
        yield fake

"""An MCP server's question on WhatsApp across processes: two ``iris serve`` on one real Redis,
both serving Meta's webhook (as ``--workers`` or two hosts behind a balancer do), the Cloud
API stand-in and the fake MCP server (``tests/fakes/mcp_server.py``, a stdio child of each).

The call runs on A, which asks by reply; the person's answers are delivered to B. B hands each
to A instead of starting a turn: a wrong one is asked again (by A, with the reason), the last
one reaches the server, and no second turn runs. Once the question ended, a message to B is
a message like any other. Before, B took the answer as a new message and the question timed
out."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from iris.surfaces.chat.platforms.whatsapp import WEBHOOK_PATH
from tests.chat.approval_chats import tool_result
from tests.chat.whatsapp.harness import OWNER, VERIFY
from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.fakes.whatsapp_api import WhatsAppAPI
from tests.scale.conftest import RedisServer, serve_on_redis

pytestmark = pytest.mark.timeout(120)


@contextlib.asynccontextmanager
async def two(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer, api: WhatsAppAPI
) -> AsyncGenerator[tuple[str, str]]:
    """The webhooks of A and B (each checks its token against the stand-in as it starts,
    which this loop serves: they start aside)."""
    whatsapp: dict[str, Any] = {
        "enabled": True,
        "base_url": api.base_url,
        "phone_number_id": api.phone_number_id,
        "access_token": api.token,
        "app_secret": api.app_secret,
        "verify_token": VERIFY,
        "allowed_users": [OWNER],
        "debounce": 0,
    }
    with contextlib.ExitStack() as stack:
        served = serve_on_redis(
            tmp_path,
            upstream.base_url,
            redis_server,
            platforms={"iris": {"enabled": False}, "whatsapp": whatsapp},
            streaming={"enabled": True},
            tools={"enabled": [], "approval": {"mode": "off", "timeout": 60}},
            mcp_servers={"fake": stdio()},
        )
        running = await asyncio.to_thread(stack.enter_context, served)
        (_, a), (_, b) = running
        yield a + WEBHOOK_PATH, b + WEBHOOK_PATH


@pytest.fixture
async def api() -> AsyncIterator[WhatsAppAPI]:
    async with WhatsAppAPI(pair_every=0.0) as fake:
        yield fake


async def said(api: WhatsAppAPI, count: int) -> list[str]:
    """Wait until the bot sent the person ``count`` messages; all it sent."""
    await api.wait_until(lambda: len(api.texts_to(OWNER)) >= count, within=60)
    return api.texts_to(OWNER)


async def test_answers_delivered_to_the_other_process_reach_the_call_and_start_no_turn(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer, api: WhatsAppAPI
) -> None:
    upstream.script(tool_call("mcp_fake_paint", ["{}"]), text("Painted."), text("Hello again."))
    async with two(tmp_path, upstream, redis_server, api) as (a, b):
        await api.user_says(a, OWNER, "paint it")  # the call runs on A
        [colour] = await said(api, 1)
        assert "fake asks: Which colour?" in colour
        await api.user_says(b, OWNER, "2")  # green, by its number, delivered to B
        coats = (await said(api, 2))[1]
        assert "Coats * (How many coats)" in coats and "asking 2 of 2" in coats
        await api.user_says(b, OWNER, "9")  # past the schema's maximum: asked again
        again = (await said(api, 3))[2]
        assert "⚠️ must be at most 5, please answer again." in again
        await api.user_says(b, OWNER, "2")
        await api.wait_until(lambda: "Painted." in api.texts_to(OWNER), within=60)
        assert tool_result(upstream.requests[1]) == "painted green x2"
        assert any("✅ Answered by" in t for t in api.texts_to(OWNER))
        assert len(upstream.requests) == 2, "the replies answered the question, no turn ran"
        # The question is over: a message to B is a message, its turn runs on B.
        await api.user_says(b, OWNER, "hello")
        await api.wait_until(lambda: "Hello again." in api.texts_to(OWNER), within=60)
        assert upstream.requests[2].body["messages"][-1]["content"] == "hello"


async def test_a_decline_word_delivered_to_the_other_process_ends_the_request(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer, api: WhatsAppAPI
) -> None:
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Kept."))
    async with two(tmp_path, upstream, redis_server, api) as (a, b):
        await api.user_says(a, OWNER, "delete a.txt")
        await said(api, 1)
        await api.user_says(b, OWNER, "Decline")
        await api.wait_until(lambda: "Kept." in api.texts_to(OWNER), within=60)
        assert tool_result(upstream.requests[1]) == "not deleted (decline)"
        assert any("❌ Declined by" in t for t in api.texts_to(OWNER))
        assert len(upstream.requests) == 2, "the word answered the question, no turn ran"

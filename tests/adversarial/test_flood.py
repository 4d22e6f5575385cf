"""Finding 3 of the second pass: a flood became one model request per message (500 Telegram
messages in 10 s → 497 upstream requests, each with up to 202 history messages): each message
interrupted the running turn and the next started at once. Messages of one chat that arrive
within ``platforms.<p>.debounce`` of each other are one turn now."""

from __future__ import annotations

import asyncio

from iris.surfaces.chat.platforms.base import IncomingMessage
from tests.chat.conftest import Gateway, gateway  # noqa: F401  (fixture)
from tests.conftest import MakeConfig  # noqa: F401
from tests.fakes.upstream import FakeUpstream, text

DEBOUNCE = 0.3


async def test_a_flood_of_messages_is_a_handful_of_model_requests(
    gateway: Gateway,  # noqa: F811
    upstream: FakeUpstream,
) -> None:
    upstream.script(*[text(f"answer {n}") for n in range(200)])
    surface, platform = await gateway(telegram={"debounce": DEBOUNCE})
    for n in range(200):  # a message every 20 ms, as a script sends them
        await platform.deliver(IncomingMessage("telegram", "c1", "7", f"message {n}"))
        await asyncio.sleep(0.02)
    await surface.idle()
    assert 1 <= len(upstream.requests) <= 10, len(upstream.requests)
    last = upstream.requests[-1].body["messages"]
    assert last[-1]["content"] == "message 199"  # the newest runs, the others are its context
    assert any(m["content"] == "message 198" for m in last)


async def test_a_message_in_a_quiet_chat_runs_at_once(
    gateway: Gateway,  # noqa: F811
    upstream: FakeUpstream,
) -> None:
    upstream.script(text("Hello"), text("Again"))
    surface, platform = await gateway(telegram={"debounce": 30})
    await platform.deliver(IncomingMessage("telegram", "c1", "7", "hi"))
    await surface.idle()  # no 30 s wait: nothing came before it
    assert len(upstream.requests) == 1

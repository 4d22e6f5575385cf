"""The edge of a chat's budget on the Telegram stand-in: no self-caused 429, counted on arrival.

A private-chat reply too long for one message is sent as two ``sendMessage`` back to back,
one interval apart: the case that drew a per-chat 429 when the first call reached the platform
later than the second (the fake counts each chat's calls when they arrive, one a second, as
Telegram does). Twenty such replies at once through the real gateway, python-telegram-bot and
the Bot API fake over a real socket.
"""

from __future__ import annotations

import itertools

import pytest

from tests.chat.harness import platform_config, running
from tests.conftest import MakeConfig
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, text

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]

RUNS = 20
CHUNKS = [f"word{i:05d} " for i in range(600)]  # 6 000 characters: two Telegram messages
REPLY = "".join(CHUNKS).strip()


async def test_twenty_split_replies_at_the_budgets_edge_draw_no_429(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    chats = [1000 + n for n in range(RUNS)]
    upstream.script(*(text(*CHUNKS, delay=0.0) for _ in chats))
    async with FakeBotApi(chat_rate=(1, 1.0)) as api:
        settings = {
            "token": api.token,
            "base_url": api.base_url,
            "allowed_users": chats,
            "poll_timeout": 1,
        }
        config = platform_config(make_config, upstream, "telegram", settings)
        async with running(config) as surface:
            for chat in chats:
                api.user_says(chat_id=chat, user_id=chat, text="a long answer, please")
            await api.wait_until(lambda: all(len(api.chat(chat)) == 2 for chat in chats), within=45)
            await surface.idle()
        # Every reply whole, in two messages, and not one 429 the bot caused.
        assert api.chat_limited == 0 and api.limited == 0
        for chat in chats:
            assert "".join(api.chat(chat)).replace(" ", "") == REPLY.replace(" ", "")
            arrivals = [call.arrived for call in api.sent_in(chat, "sendMessage")]
            assert len(arrivals) == 2
            assert all(b - a >= 1.0 for a, b in itertools.pairwise(arrivals))

"""A one-off bot message (a refusal, a busy note, a command's answer), sent within the budgets.

A reply's messages go out through its consumer, which waits for the chat's throttle and the
bot's shared budget. The runner's own messages are single sends, but they count against the
same limits (Telegram's 30 messages a second per bot, Discord's global limit, the chat's own
pace), so they wait the same way: for the chat's ``Throttle`` (the conversation's, shared with
the reply being written there, or a fresh one for a chat without a conversation) and, through
its seat, for their turn in the bot's line. They stand with a chat's first visible text: after
final deliveries, before preview edits. One call, like every send: a 429 is recorded on the
throttle (the chat backs off) and raised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from iris.observability import metrics
from iris.surfaces.chat.platforms.base import ChatPlatform, PlatformRateLimited
from iris.surfaces.chat.throttle import Throttle
from iris.surfaces.driver import Clock, Sleep, loop_clock


async def send_once(
    platform: ChatPlatform,
    chat_id: str,
    text: str,
    *,
    throttle: Throttle,
    thread: Mapping[str, str] | None = None,
    clock: Clock = loop_clock,
    sleep: Sleep = asyncio.sleep,
) -> str:
    """Send ``text`` as one new message once the budgets allow; its platform id."""
    try:
        while (at := throttle.ready_at("send", now := clock(), "first")) > now:
            await sleep(at - now)
    except BaseException:
        throttle.withdraw()  # cancelled while in line: the others need not wait for it
        raise
    throttle.spend("send", now)
    try:
        message_id = await platform.send(chat_id, text, thread=thread)
    except PlatformRateLimited as exc:
        metrics.chat_rate_limited(platform.name, exc.scope)
        throttle.rate_limited(exc.retry_after, clock())
        raise
    finally:
        throttle.answered(clock())  # its slot also counts from its answer
    throttle.succeeded()
    return message_id

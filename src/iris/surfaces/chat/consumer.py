"""The one stream consumer of every chat platform: a turn's events in, sends and edits out.

The decisions live in ``reply.Reply`` (what to show) and ``throttle.Throttle`` (when); this
module is the thin async transport around them. Two tasks share one ``Reply``:

- the pump reads the turn's events as fast as they come, so a slow platform never slows the
  agent (text is coalesced: each edit shows the newest text);
- the flusher executes one platform call at a time for the chat, sleeping until the throttle
  allows the next one or a new event arrives.

The typing indicator is a lease held from the first event until the turn's last event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterable, Callable, Mapping
from typing import assert_never

from iris.config import ResolvedDisplay
from iris.events import Event, TerminalEvent, TurnEnded, TurnFailed
from iris.surfaces.chat.lease import TypingLease
from iris.surfaces.chat.platform import ChatPlatform, PlatformError, PlatformRateLimited
from iris.surfaces.chat.reply import Action, Edit, Reply, Send
from iris.surfaces.chat.throttle import Throttle

log = logging.getLogger(__name__)

Clock = Callable[[], float]


def loop_clock() -> float:
    # The event loop's clock: the flusher's timeouts run on it, so decisions must too.
    return asyncio.get_running_loop().time()


class StreamConsumer:
    def __init__(
        self,
        platform: ChatPlatform,
        chat_id: str,
        *,
        display: ResolvedDisplay,
        streaming: bool,
        throttle: Throttle,
        thread: Mapping[str, str] | None = None,
        clock: Clock = loop_clock,
        typing_every: float = 4.0,
        typing_limit: float = 300.0,
    ) -> None:
        self.platform = platform
        self.chat_id = chat_id
        self.thread = dict(thread or {})
        self.throttle = throttle
        self.clock = clock
        self.reply = Reply(platform.capabilities, display, preview=streaming)
        self.typing = TypingLease(
            platform, chat_id, thread=self.thread, every=typing_every, limit=typing_limit
        )
        self._wake = asyncio.Event()

    async def consume(self, events: AsyncIterable[Event]) -> TerminalEvent:
        """Deliver the turn; return its last event once every message is settled."""
        async with self.typing:
            pump = asyncio.create_task(self._pump(events), name=f"pump:{self.chat_id}")
            try:
                await self._flush(pump)
            finally:
                self.throttle.withdraw()  # a chat that stops leaves the bot's shared line
                if not pump.done():
                    pump.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pump
        outcome = self.reply.outcome
        assert outcome is not None  # the pump always ends the reply
        return outcome

    async def _pump(self, events: AsyncIterable[Event]) -> None:
        reply = self.reply
        try:
            async for event in events:
                reply.apply(event)
                self._wake.set()
                if isinstance(event, TurnEnded | TurnFailed):
                    break
        except Exception:
            log.exception("turn stream for %s failed", self.chat_id)
            reply.apply(TurnFailed("internal_error", "The reply failed.", partial_text=""))
        finally:
            self.typing.release()
            if not reply.ended:
                # The stream stopped without a last event: settle what was shown, no cursor.
                reply.apply(TurnEnded(text="", reason="interrupted"))
            self._wake.set()

    async def _flush(self, pump: asyncio.Task[None]) -> None:
        reply, throttle = self.reply, self.throttle
        while True:
            now = self.clock()
            action = reply.next_action(throttle, now)
            if action is not None:
                await self._execute(action)
                continue
            if pump.done() and reply.settled:
                return
            due = reply.due(throttle, now)
            self._wake.clear()
            timeout = None if due is None else max(0.0, due - now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def _execute(self, action: Action) -> None:
        reply, throttle = self.reply, self.throttle
        try:
            match action:
                case Send(text=text):
                    message_id = await self.platform.send(self.chat_id, text, thread=self.thread)
                    reply.landed(action, throttle, message_id)
                case Edit(message_id=message_id, text=text):
                    await self.platform.edit_message(
                        self.chat_id, message_id, text, thread=self.thread
                    )
                    reply.landed(action, throttle)
                case _:
                    assert_never(action)
        except PlatformRateLimited as exc:
            log.info(
                "%s rate limited in %s: retry after %.1fs",
                self.platform.name,
                self.chat_id,
                exc.retry_after,
            )
            reply.rate_limited(action, throttle, exc.retry_after, self.clock())
        except PlatformError as exc:
            log.warning("%s call failed in %s: %s", self.platform.name, self.chat_id, exc)
            reply.failed(action, throttle, self.clock(), maybe_landed=exc.maybe_landed)
        except Exception:
            # An adapter bug: count it as a failed call so the reply still settles.
            log.exception("%s adapter raised in %s", self.platform.name, self.chat_id)
            reply.failed(action, throttle, self.clock(), maybe_landed=False)

"""The one stream consumer of every chat platform: a turn's events in, sends and edits out.

The decisions live in ``reply.Reply`` (what to show, laid out by its mode's layout) and ``throttle.Throttle`` (when); this
module is the thin async transport around them, run by the surfaces' one driver
(``surfaces.driver``): the turn's events are read as fast as they come, so a slow platform
never slows the agent (text is coalesced: each edit shows the newest text), and one platform
call at a time goes out for the chat, sleeping until the throttle allows the next one or a new
event arrives. Clock and sleep are injected: tests/chat/sim.py runs this on virtual time.

The typing indicator is a lease held from the first event until the turn's last event.

With a ``native`` transport (``transport.choose``) the same plan runs with the matching layout
and its actions go out as Telegram drafts or Slack streams; a chat that refuses drafts hands
this reply over to edits (``Reply.drafts_refused``; ``native_refused`` tells the runner to use
edits from then on).

Approval requests (``ApprovalRequested``) go out beside the reply as prompts with buttons
(``prompts.ReplyPrompts``: the plan; ``platform.ApprovalPlatform``: the calls), through the
same throttle, one call at a time with the reply's, the reply's own call first when both are
due; ``ApprovalResolved`` closes the prompt (an edit saying who decided what), and the reply is
settled only once every prompt call went out.

A platform that cannot edit streams in blocks (``reply.BlocksLayout``) unless
``display.platforms.<p>.transport`` is ``final``; ``blocks`` and ``final`` apply to a platform
that edits too. A chat the platform closed (``ChatClosed``) gets nothing more of this reply.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from typing import assert_never

from iris.config import ResolvedDisplay
from iris.errors import StoreUnavailable
from iris.events import (
    ApprovalRequested,
    ApprovalResolved,
    Event,
    TerminalEvent,
    TurnEnded,
    TurnFailed,
)
from iris.observability import metrics
from iris.surfaces.chat.platforms.base import (
    ChatClosed,
    ChatPlatform,
    Native,
    NativeRefused,
    PlatformError,
    PlatformRateLimited,
    approval_platform,
)
from iris.surfaces.chat.prompts import (
    ClosePrompt,
    PromptAction,
    Prompts,
    ReplyPrompts,
    SendPart,
    SendPrompt,
)
from iris.surfaces.chat.reply import Action, Delete, Draft, Edit, Send
from iris.surfaces.chat.throttle import Throttle
from iris.surfaces.chat.transport import StreamTransport, plan_for, unquoted
from iris.surfaces.chat.typing_lease import TypingLease
from iris.surfaces.driver import Clock, Sleep, drive, loop_clock

log = logging.getLogger(__name__)


class StreamConsumer:
    """One turn's reply in one chat; the driver's planner for it (feed, act, due, settled)."""

    def __init__(
        self,
        platform: ChatPlatform,
        chat_id: str,
        *,
        display: ResolvedDisplay,
        streaming: bool,
        throttle: Throttle,
        thread: Mapping[str, str] | None = None,
        native: Native | None = None,
        clock: Clock = loop_clock,
        sleep: Sleep = asyncio.sleep,
        typing_every: float = 4.0,
        typing_limit: float = 300.0,
        first_draft: int = 1,
        quote: Callable[[], str] | None = None,
        prompts: Prompts | None = None,
        session: str = "",
    ) -> None:
        self.platform = platform
        self.chat_id = chat_id
        self.thread = dict(native.thread if native is not None else thread or {})
        self.throttle = throttle
        self.clock = clock
        self.sleep = sleep
        self._drafts_refused = False
        self.transport, self.reply = plan_for(
            platform,
            chat_id,
            self.thread,
            display=display,
            streaming=streaming,
            native=native,
            first_draft=first_draft,
            quote=quote or unquoted,
        )
        self.typing = TypingLease(
            platform, chat_id, thread=self.thread, every=typing_every, limit=typing_limit
        )
        # The approval prompts of this reply; plain notes where the platform has no buttons.
        self._buttons = approval_platform(platform) if prompts is not None else None
        self.prompts = self._prompts(prompts if self._buttons is not None else None, session)

    def _prompts(self, prompts: Prompts | None, session: str) -> ReplyPrompts:
        """The plan of this reply's approval prompts, each held to what one message takes."""
        caps = self.reply.caps
        limit = caps.max_length
        if self._buttons is not None:
            limit = min(limit, self._buttons.approval_limit)
        return ReplyPrompts(
            prompts,
            platform=self.platform.name,
            chat_id=self.chat_id,
            session=session,
            thread=self.thread,
            limit=limit,
            unit=caps.length_unit,
        )

    @property
    def native_refused(self) -> bool:
        """The platform refused this chat's native transport: later replies should edit."""
        transport = self.transport
        return self._drafts_refused or (
            isinstance(transport, StreamTransport) and transport.refused
        )

    def shows_draft(self, draft_id: int) -> bool:
        """Is ``draft_id`` a draft of this reply (a stop button pressed on it stops this turn)?"""
        return self.reply.drafted(draft_id)

    @property
    def next_draft(self) -> int:
        """Where the chat's next reply starts numbering its drafts."""
        return self.reply.next_draft

    async def consume(self, events: AsyncIterable[Event]) -> TerminalEvent:
        """Deliver the turn; return its last event once every message is settled."""
        async with self.typing:
            try:
                await drive(self._ended(events), self, clock=self.clock, sleep=self.sleep)
            finally:
                self.throttle.withdraw()  # a chat that stops leaves the bot's shared line
        outcome = self.reply.outcome
        assert outcome is not None  # the events always end the reply
        return outcome

    async def _ended(self, events: AsyncIterable[Event]) -> AsyncIterator[Event]:
        """The turn's events, always closed by a last event: a broken stream ends as failed,
        one that stops without a last event as interrupted (what was shown settles, no cursor)."""
        try:
            async for event in events:
                yield event
                if isinstance(event, TurnEnded | TurnFailed):
                    return
        except Exception:
            log.exception("turn stream for %s failed", self.chat_id)
            yield TurnFailed("internal_error", "The reply failed.", partial_text="")
            return
        yield TurnEnded(text="", reason="interrupted")

    # -- the planner ---------------------------------------------------------------------
    async def feed(self, event: Event) -> bool:
        match event:
            case ApprovalRequested():
                self.prompts.requested(event, time.time())
                self.typing.pause(self.prompts.waiting)
            case ApprovalResolved():
                self.prompts.resolved(event)
                self.typing.pause(self.prompts.waiting)
            case _:
                pass
        self.reply.apply(event, self.clock())
        if self.reply.ended:
            self.typing.release()
            self.prompts.ended()
        return self.reply.ended

    async def act(self, now: float) -> bool:
        action = self.reply.next_action(self.throttle, now)
        if action is not None:
            await self._execute(action)
            return True
        prompt = self.prompts.next()
        if prompt is None or self._prompt_ready_at(prompt, now) > now:
            return False
        kind = "edit" if isinstance(prompt, ClosePrompt) else "send"
        self.throttle.spend(kind, now)
        try:
            await self._prompt_call(prompt)
        finally:
            self.throttle.answered(self.clock())
        return True

    def due(self, now: float) -> float | None:
        due = self.reply.due(self.throttle, now)
        prompt = self.prompts.next()
        if prompt is not None:
            at = self._prompt_ready_at(prompt, now)
            due = at if due is None else min(due, at)
        return due

    @property
    def settled(self) -> bool:
        return self.reply.settled and not self.prompts.pending

    def _prompt_ready_at(self, prompt: PromptAction, now: float) -> float:
        # A request waits on a person: it stands with a chat's first text in the bot's line.
        kind = "edit" if isinstance(prompt, ClosePrompt) else "send"
        return self.throttle.ready_at(kind, now, "first")

    async def _prompt_call(self, prompt: PromptAction) -> None:
        name, status = self.platform.name, "cancelled"
        method = "edit" if isinstance(prompt, ClosePrompt) else "send"
        try:
            match prompt:
                case SendPart() if self._buttons is not None:
                    message_id = await self._buttons.send_as_written(
                        self.chat_id, prompt.text, thread=self.thread
                    )
                case SendPart():
                    message_id = await self.platform.send(
                        self.chat_id, prompt.text, thread=self.thread
                    )
                case SendPrompt():
                    assert self._buttons is not None
                    message_id = await self._buttons.send_prompt(
                        self.chat_id, prompt.prompt, thread=self.thread
                    )
                case ClosePrompt():
                    assert self._buttons is not None
                    await self._buttons.close_prompt(
                        self.chat_id, prompt.message_id, prompt.text, thread=self.thread
                    )
                    message_id = prompt.message_id
                case _:
                    assert_never(prompt)
            self.throttle.succeeded()
            self.prompts.landed(prompt, message_id)
            status = "ok"
            if isinstance(prompt, SendPrompt) and self.prompts.prompts is not None:
                await self._share(self.prompts.prompts, prompt.approval_id)
        except PlatformRateLimited as exc:
            status = "rate_limited"
            metrics.chat_rate_limited(name, exc.scope)
            self.throttle.rate_limited(exc.retry_after, self.clock())
            self.prompts.failed(prompt, retry=True)
        except PlatformError as exc:
            status = "error"
            # A prompt that did not go out leaves its request to the timeout: said in the log.
            log.warning("%s: approval message failed in %s: %s", name, self.chat_id, exc)
            self.prompts.failed(prompt, retry=False)
        except Exception:
            status = "error"
            log.exception("%s adapter raised on an approval message in %s", name, self.chat_id)
            self.prompts.failed(prompt, retry=False)
        finally:
            metrics.chat_call(name, method, status)

    async def _share(self, prompts: Prompts, approval_id: str) -> None:
        """Let a press that reaches another process answer the prompt (``store.url``); if the
        store is away, a press here still does."""
        try:
            await prompts.shown(approval_id)
        except StoreUnavailable as exc:
            log.warning("approval prompt in %s kept here only: %s", self.chat_id, exc.message)

    async def _execute(self, action: Action) -> None:
        try:
            await self._call(action)
        finally:
            if not isinstance(action, Draft):  # a draft draws on no budget
                # Answered, failed or timed out: the call's slot also counts from now.
                self.throttle.answered(self.clock())

    async def _deliver(self, action: Action) -> None:
        """Make ``action``'s platform call; the reply hears that it landed."""
        reply, throttle = self.reply, self.throttle
        match action:
            case Send():
                message_id = await self.transport.send(action)
                reply.landed(action, throttle, message_id)
            case Edit():
                await self.transport.edit(action)
                reply.landed(action, throttle)
            case Draft():
                await self.transport.draft(action)
                reply.landed(action, throttle)
            case Delete():
                await self.transport.delete(action)
                reply.landed(action, throttle)
            case _:
                assert_never(action)

    async def _call(self, action: Action) -> None:
        """``_deliver``, with the platform's answer told to the reply whatever it is."""
        reply, throttle = self.reply, self.throttle
        status = "cancelled"  # of this call, for iris_chat_platform_calls
        try:
            await self._deliver(action)
            status = "ok"
        except ChatClosed as exc:
            status = "closed"
            log.warning(
                "%s: %s closed to messages: %s; the rest of this reply is not sent",
                self.platform.name,
                self.chat_id,
                exc,
            )
            reply.close()
        except NativeRefused as exc:
            status = "refused"
            if isinstance(action, Draft):
                log.info(
                    "%s: drafts refused in %s (%s); using edits",
                    self.platform.name,
                    self.chat_id,
                    exc,
                )
                self._drafts_refused = True
                reply.drafts_refused()
            else:
                reply.failed(action, throttle, self.clock(), maybe_landed=False)
        except PlatformRateLimited as exc:
            status = "rate_limited"
            metrics.chat_rate_limited(self.platform.name, exc.scope)
            log.info(
                "%s rate limited in %s: retry after %.1fs",
                self.platform.name,
                self.chat_id,
                exc.retry_after,
            )
            reply.rate_limited(action, throttle, exc.retry_after, self.clock())
        except PlatformError as exc:
            status = "error"
            log.warning("%s call failed in %s: %s", self.platform.name, self.chat_id, exc)
            reply.failed(action, throttle, self.clock(), maybe_landed=exc.maybe_landed)
        except Exception:
            # An adapter bug: count it as a failed call so the reply still settles.
            status = "error"
            log.exception("%s adapter raised in %s", self.platform.name, self.chat_id)
            reply.failed(action, throttle, self.clock(), maybe_landed=False)
        finally:
            metrics.chat_call(self.platform.name, type(action).__name__.lower(), status)

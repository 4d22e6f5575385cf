"""How one reply's planned actions reach the platform: edits, Telegram drafts or Slack streams.

``reply.Reply`` plans *what* is due (with one layout per mode, picked here by ``plan_for``); a
transport turns each ``Send`` / ``Edit`` / ``Draft`` into the platform's calls. Every transport
keeps the planner's contract: one action, one answer (landed, rate limited, failed, maybe
landed), and text the platform already holds is never sent twice.

- ``EditTransport``: ``send`` and ``edit_message``, as every platform has (and, where the
  runner asks for it and the platform can, a new message quoting the user's: ``quote``).
- ``DraftTransport``: the same, plus ``send_draft`` for the ``Draft`` actions of a Telegram
  private chat (the messages themselves are the planner's whole, settled parts).
- ``StreamTransport``: a Slack message that streams. A ``Send`` opens the stream
  (``chat.startStream``), an ``Edit`` that extends the text appends the delta
  (``chat.appendStream``), the message's final ``Edit`` appends the rest and ends it
  (``chat.stopStream``). A message whose text was taken back (a retry that diverged), or whose
  append or stop failed (it may have landed), leaves streaming: its stream is stopped and it continues
  by ``chat.update`` with its whole text, which is idempotent. A tool batch's message is a
  ``task_update`` timeline instead of text. A platform that refuses ``startStream`` gets the
  whole reply by ``chat.postMessage`` / ``chat.update`` (logged once).

Each transport also says which calls a planned ``Send`` / ``Edit`` would make now (``draws``),
so the planner waits for the shared budget of the method that actually goes out: a stream's
start, append or stop on the stream methods' budget, a message that left streaming on
``chat.update``'s (Slack limits each method per workspace on its own).

- ``WholeTransport``: a platform whose answers go out whole (``capabilities.whole``: Home
  Assistant notifications). The plan sends settled text only, once; each message of the reply
  goes out as the reply so far, under the one id the platform keeps per conversation, so
  what stays is the whole answer, never a half one, and no tool progress is planned at all.
  ``whole`` holds such a turn's events until it ends: one that failed shows its failure
  without the text so far, one cut short (a newer message came) shows nothing.

``choose`` picks the native kind for a chat from ``display.platforms.<p>.transport``
(``blocks`` and ``final`` are plain sends: ``EditTransport``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, cast

from iris.config import ResolvedDisplay
from iris.config import Transport as TransportSetting
from iris.events import Event, TurnEnded, TurnFailed, TurnStarted
from iris.surfaces.chat.budget import Draws
from iris.surfaces.chat.platforms.base import (
    ChatPlatform,
    DraftPlatform,
    IncomingMessage,
    Native,
    NativeRefused,
    PlatformError,
    PlatformRateLimited,
    QuotingPlatform,
    StreamPlatform,
    Task,
)
from iris.surfaces.chat.reply import Delete, Draft, Edit, Reply, Send, plain_draws

log = logging.getLogger(__name__)

# Slack's chat.appendStream takes at most this many characters per call; a streamed message is
# held to it, so every delta fits one call.
STREAM_APPEND_MAX = 12_000


class Transport(Protocol):
    def draws(self, action: Send | Edit) -> Draws:
        """The calls ``action`` would make now, for the shared budgets."""
        ...

    async def send(self, action: Send) -> str:
        """Deliver a new message; its platform id."""
        ...

    async def edit(self, action: Edit) -> None: ...

    async def draft(self, action: Draft) -> None: ...

    async def delete(self, action: Delete) -> None: ...


class _Deletes(Protocol):
    async def delete_message(
        self, chat_id: str, message_id: str, *, thread: Mapping[str, str] | None = None
    ) -> None: ...


def can_delete(platform: ChatPlatform) -> bool:
    """Does the adapter delete messages (for fresh final)?"""
    return callable(getattr(platform, "delete_message", None))


class _Native(Protocol):
    def native_for(self, message: IncomingMessage) -> Native | None: ...


def choose(
    platform: ChatPlatform, message: IncomingMessage, setting: TransportSetting
) -> Native | None:
    """The native transport for this chat, or None for edits.

    ``auto`` and ``native`` both stream natively where the platform supports it for this chat
    type; ``native`` says once in the log when it cannot. Blocks and final messages are no
    native kind."""
    if setting not in ("auto", "native"):
        return None
    native_for = getattr(platform, "native_for", None)
    native = cast(_Native, platform).native_for(message) if callable(native_for) else None
    if native is None and setting == "native":
        log.info("%s: no native streaming in chat %s; using edits", platform.name, message.chat_id)
    return native


def unquoted() -> str:
    """No message to quote."""
    return ""


@dataclass
class EditTransport:
    platform: ChatPlatform
    chat_id: str
    thread: Mapping[str, str] = field(default_factory=dict[str, str])
    # The user's message a new message should quote now ("": none), where the platform quotes.
    quote: Callable[[], str] = unquoted

    def draws(self, action: Send | Edit) -> Draws:
        return plain_draws(action)

    async def send(self, action: Send) -> str:
        quoted = self.quote()
        if quoted and callable(getattr(self.platform, "send_quoting", None)):
            quoting = cast(QuotingPlatform, self.platform)
            return await quoting.send_quoting(self.chat_id, action.text, quoted, thread=self.thread)
        return await self.platform.send(self.chat_id, action.text, thread=self.thread)

    async def edit(self, action: Edit) -> None:
        await self.platform.edit_message(
            self.chat_id, action.message_id, action.text, thread=self.thread
        )

    async def draft(self, action: Draft) -> None:
        raise NativeRefused(f"{self.platform.name}: no drafts")

    async def delete(self, action: Delete) -> None:
        deletes = cast(_Deletes, self.platform)
        await deletes.delete_message(self.chat_id, action.message_id, thread=self.thread)


@dataclass
class DraftTransport(EditTransport):
    can_stop: bool = False

    async def draft(self, action: Draft) -> None:
        drafts = cast(DraftPlatform, self.platform)
        await drafts.send_draft(
            self.chat_id, action.draft_id, action.text, thread=self.thread, can_stop=self.can_stop
        )


@dataclass
class WholeTransport(EditTransport):
    _parts: list[str] = field(default_factory=list[str])

    async def send(self, action: Send) -> str:
        # The platform replaces its notification by id: each send is the whole reply so far.
        whole = "\n\n".join([*self._parts, action.text])
        message_id = await self.platform.send(self.chat_id, whole, thread=self.thread)
        self._parts.append(action.text)
        return message_id


@dataclass
class _Stream:
    text: str  # what the streamed message holds
    tasks: dict[str, tuple[str, str]]  # task id -> (status, details) shown
    timeline: bool  # a tool batch: the message is its tasks, not its text
    open: bool = True
    edits: bool = False  # left streaming: continues by chat.update


@dataclass
class StreamTransport(EditTransport):
    _streams: dict[str, _Stream] = field(default_factory=dict[str, _Stream])
    refused: bool = False

    @property
    def _native(self) -> StreamPlatform:
        return cast(StreamPlatform, self.platform)

    def draws(self, action: Send | Edit) -> Draws:
        # Mirrors the branches of ``send`` and ``edit``, call for call.
        if isinstance(action, Send):
            return ("send",) if self.refused or action.final else ("stream_start",)
        stream = self._streams.get(action.message_id)
        if stream is None:
            return () if action.cleanup else ("edit",)
        if stream.timeline:
            if stream.edits or not stream.open:
                return () if action.cleanup else ("edit",)
            if action.final or action.cleanup:
                return ("stream_stop",)
            changed = any(stream.tasks.get(t.id) != _shown(t) for t in action.tasks)
            return ("stream_append",) if changed else ()
        if self._leaves(action, stream):
            stop: Draws = ("stream_stop",) if stream.open else ()
            return stop if action.cleanup else (*stop, "edit")
        if action.final:
            return ("stream_stop",)
        return ("stream_append",) if action.text != stream.text else ()

    async def send(self, action: Send) -> str:
        if self.refused or action.final:
            # Settled text needs no stream: one ordinary message.
            return await super().send(action)
        timeline = bool(action.tasks)
        try:
            message_id = await self._native.start_stream(
                self.chat_id,
                "" if timeline else action.text,
                thread=self.thread,
                tasks=action.tasks,
            )
        except NativeRefused as exc:
            log.info(
                "%s: streams refused in %s (%s); using edits", self.platform.name, self.chat_id, exc
            )
            self.refused = True
            return await super().send(action)
        self._streams[message_id] = _Stream(action.text, _statuses(action.tasks), timeline)
        return message_id

    async def edit(self, action: Edit) -> None:
        stream = self._streams.get(action.message_id)
        if stream is None:
            if not action.cleanup:
                await super().edit(action)
            return
        if stream.timeline:
            await self._timeline(action, stream)
            return
        if self._leaves(action, stream):
            await self._leave(action, stream)
            if not action.cleanup:
                await super().edit(action)
            stream.text = action.text
            return
        delta = action.text[len(stream.text) :]
        try:
            if action.final:
                await self._native.stop_stream(self.chat_id, action.message_id, delta)
                stream.open = False
            elif delta:
                await self._native.append_stream(self.chat_id, action.message_id, delta)
        except PlatformRateLimited:
            raise
        except PlatformError:
            # The delta may or may not be in the message (or the stream ended on Slack's
            # side): the retry ends the stream and sets the whole text.
            stream.edits = True
            raise
        stream.text = action.text

    async def _timeline(self, action: Edit, stream: _Stream) -> None:
        if stream.edits or not stream.open:
            if not action.cleanup:
                await super().edit(action)
            return
        changed = [t for t in action.tasks if stream.tasks.get(t.id) != _shown(t)]
        if action.final or action.cleanup:
            await self._native.stop_stream(self.chat_id, action.message_id, tasks=changed)
            stream.open = False
        elif changed:
            await self._native.append_stream(self.chat_id, action.message_id, "", tasks=changed)
        stream.tasks.update(_statuses(changed))

    @staticmethod
    def _leaves(action: Edit, stream: _Stream) -> bool:
        """The message goes on by ``chat.update``: it left streaming, its stream ended, or the
        text was taken back."""
        return stream.edits or not stream.open or not action.text.startswith(stream.text)

    async def _leave(self, action: Edit, stream: _Stream) -> None:
        """End the stream as it stands; the message goes on by edits."""
        if stream.open:
            await self._native.stop_stream(self.chat_id, action.message_id)
            stream.open = False
        stream.edits = True


def _statuses(tasks: tuple[Task, ...] | list[Task]) -> dict[str, tuple[str, str]]:
    return {task.id: _shown(task) for task in tasks}


def _shown(task: Task) -> tuple[str, str]:
    """What a timeline shows of a task: a new status or progress note is a change."""
    return task.status, task.details


async def whole(events: AsyncIterable[Event]) -> AsyncIterator[Event]:
    """A turn for a platform that shows answers whole: nothing until it ended; then all of it,
    or, when it failed or was cut short, its start and its end without its text (never half
    an answer)."""
    held: list[Event] = []
    async for event in events:
        match event:
            case TurnFailed():
                end: Event = dataclasses.replace(event, partial_text="")
            case TurnEnded(reason="interrupted"):
                end = dataclasses.replace(event, text="")
            case TurnEnded():
                held.append(event)
                for kept in held:
                    yield kept
                return
            case _:
                held.append(event)
                continue
        for kept in held[:1]:
            if isinstance(kept, TurnStarted):
                yield kept
        yield end
        return


def blocks(can_edit: bool, display: ResolvedDisplay) -> bool:
    """Does a streamed reply go out in blocks? Where the platform cannot edit, unless the
    transport says ``final``; anywhere it says ``blocks``."""
    if display.transport == "blocks":
        return True
    return not can_edit and display.transport != "final"


def plan_for(
    platform: ChatPlatform,
    chat_id: str,
    thread: Mapping[str, str],
    *,
    display: ResolvedDisplay,
    streaming: bool,
    native: Native | None = None,
    first_draft: int = 1,
    quote: Callable[[], str] = unquoted,
) -> tuple[Transport, Reply]:
    """The transport and the reply plan for one reply in one chat, chosen once from the
    platform's capabilities, the chat's native kind (``choose``) and the display settings:
    a Telegram draft, a Slack stream, blocks where the platform cannot edit (or
    ``transport: blocks``), else edits (a preview growing in place, unless streaming is off
    or ``transport: final``; fresh final and deletes where the platform deletes)."""
    caps = platform.capabilities
    if caps.whole:
        quiet = display.model_copy(update={"tool_progress": "off", "show_reasoning": False})
        return WholeTransport(platform, chat_id, thread), Reply(caps, quiet, preview=False)
    match None if native is None else native.kind:
        case "draft":
            transport = DraftTransport(platform, chat_id, thread, can_stop=display.can_stop)
            reply = Reply(
                caps,
                display,
                preview=streaming,
                mode="draft",
                draws=transport.draws,
                first_draft=first_draft,
            )
            return transport, reply
        case "stream":
            stream = StreamTransport(platform, chat_id, thread)
            caps = dataclasses.replace(caps, max_length=min(caps.max_length, STREAM_APPEND_MAX))
            return stream, Reply(
                caps, display, preview=streaming, mode="stream", draws=stream.draws
            )
        case None if blocks(caps.can_edit, display) and streaming:
            edits = EditTransport(platform, chat_id, thread, quote)
            return edits, Reply(caps, display, preview=True, mode="blocks")
        case None:
            edits = EditTransport(platform, chat_id, thread, quote)
            streaming = streaming and display.transport != "final"
            deletes = can_delete(platform)
            fresh = display.fresh_final_after if deletes else 0.0
            reply = Reply(caps, display, preview=streaming, fresh_after=fresh, deletes=deletes)
            return edits, reply

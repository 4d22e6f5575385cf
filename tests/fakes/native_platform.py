"""An in-memory chat platform with Telegram drafts and Slack streams, failing on request.

The wire-level fakes (``telegram_api``, ``slack_api``) check the real client libraries; this
one is for properties that need thousands of replies. Its streams behave like the Slack fake's:
a stream grows by appends until stopped; appending to a stopped stream is refused; stopping a
stopped stream with no text is success (as the adapter treats it). ``script`` queues outcomes
for the next reply calls (drafts excluded unless ``script_drafts``): None for success, or an
exception to raise; a ``PlatformError`` with ``maybe_landed`` is raised *after* the call took
effect, as when only the answer was lost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from iris.surfaces.chat.budget import RateBudget, SharedBudget
from iris.surfaces.chat.platforms.base import (
    Capabilities,
    IncomingMessage,
    Native,
    NativeKind,
    OnMessage,
    PlatformError,
    Task,
)


@dataclass
class StreamedMessage:
    text: str
    streaming: bool = False
    tasks: dict[str, str] = field(default_factory=dict[str, str])


@dataclass
class NativePlatform:
    kind: NativeKind | None = "stream"  # None: no native transport (edits)
    name: str = "native"
    capabilities: Capabilities = field(
        default_factory=lambda: Capabilities(
            can_edit=True, max_length=4096, length_unit="utf16", rate=RateBudget(1000, 1.0)
        )
    )
    budget: SharedBudget = field(default_factory=SharedBudget)
    script: list[BaseException | None] = field(default_factory=list[BaseException | None])
    script_drafts: bool = False
    messages: dict[str, StreamedMessage] = field(default_factory=dict[str, StreamedMessage])
    order: list[str] = field(default_factory=list[str])
    drafts: list[tuple[int, str]] = field(default_factory=list[tuple[int, str]])
    calls: list[str] = field(default_factory=list[str])
    lost: set[str] = field(default_factory=set[str])  # created, but the answer never came back

    def chat(self) -> list[str]:
        return [self.messages[m].text for m in self.order]

    def native_for(self, message: IncomingMessage) -> Native | None:
        return None if self.kind is None else Native(self.kind, message.thread)

    # -- ChatPlatform -----------------------------------------------------------------------
    async def connect(self, on_message: OnMessage) -> None:
        del on_message

    async def disconnect(self) -> None:
        pass

    async def send_typing(self, chat_id: str, *, thread: Mapping[str, str] | None = None) -> None:
        pass

    async def send(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        return self._new("send", text, streaming=False)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        def apply() -> None:
            self.messages[message_id].text = text

        self._call("edit", apply)

    async def delete_message(
        self, chat_id: str, message_id: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        def apply() -> None:
            # Deleting what is already gone is success, as the adapters treat it.
            if message_id in self.order:
                self.order.remove(message_id)

        self._call("delete", apply)

    # -- drafts -----------------------------------------------------------------------------
    async def send_draft(
        self,
        chat_id: str,
        draft_id: int,
        text: str,
        *,
        thread: Mapping[str, str] | None = None,
        can_stop: bool = False,
    ) -> None:
        if self.script_drafts:
            self._call("draft", lambda: self.drafts.append((draft_id, text)))
        else:
            self.calls.append("draft")
            self.drafts.append((draft_id, text))

    # -- streams ----------------------------------------------------------------------------
    async def start_stream(
        self,
        chat_id: str,
        text: str,
        *,
        thread: Mapping[str, str] | None = None,
        tasks: Sequence[Task] = (),
    ) -> str:
        message_id = self._new("start", text, streaming=True)
        self.messages[message_id].tasks.update({t.id: t.status for t in tasks})
        return message_id

    async def append_stream(
        self, chat_id: str, message_id: str, text: str, *, tasks: Sequence[Task] = ()
    ) -> None:
        message = self.messages[message_id]
        if not message.streaming:
            raise PlatformError("message_not_in_streaming_state")
        assert len(text) <= 12_000, "an append over Slack's limit"

        def apply() -> None:
            message.text += text
            message.tasks.update({t.id: t.status for t in tasks})

        self._call("append", apply)

    async def stop_stream(
        self, chat_id: str, message_id: str, text: str = "", *, tasks: Sequence[Task] = ()
    ) -> None:
        message = self.messages[message_id]
        if not message.streaming:
            if text:
                raise PlatformError("message_not_in_streaming_state")
            return

        def apply() -> None:
            message.text += text
            message.tasks.update({t.id: t.status for t in tasks})
            message.streaming = False

        self._call("stop", apply)

    # -- internals --------------------------------------------------------------------------
    def _new(self, kind: str, text: str, *, streaming: bool) -> str:
        message_id = str(len(self.messages) + 1)

        def apply() -> None:
            self.messages[message_id] = StreamedMessage(text, streaming)
            self.order.append(message_id)

        try:
            self._call(kind, apply)
        except PlatformError as exc:
            if exc.maybe_landed:
                self.lost.add(message_id)
            raise
        return message_id

    def _call(self, kind: str, apply: Callable[[], None]) -> None:
        self.calls.append(kind)
        outcome = self.script.pop(0) if self.script else None
        if isinstance(outcome, PlatformError) and outcome.maybe_landed:
            apply()
            raise outcome
        if outcome is not None:
            raise outcome
        apply()

"""An in-memory ``ChatPlatform`` that records every call with its time, and fails on request.

``calls`` holds every send/edit/typing in order with the loop time it started; ``messages``
holds what each message shows now, so a test can read the chat as the user sees it.
``script`` queues outcomes for the next send/edit calls (an exception instance to raise, or
None for success); ``deliver`` simulates an incoming user message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from iris.surfaces.chat.budget import RateBudget, SharedBudget
from iris.surfaces.chat.platforms.base import (
    Capabilities,
    IncomingMessage,
    OnMessage,
    PlatformError,
)

CallKind = Literal["send", "edit", "typing"]


@dataclass(frozen=True)
class Call:
    t: float
    kind: CallKind
    chat_id: str
    message_id: str
    text: str
    thread: dict[str, str]
    ok: bool = True


@dataclass
class RecordingPlatform:
    name: str = "telegram"
    capabilities: Capabilities = field(
        default_factory=lambda: Capabilities(
            can_edit=True,
            max_length=4096,
            length_unit="utf16",
            rate=RateBudget(1, 1.0),
            group_rate=RateBudget(20, 60.0),
        )
    )
    latency: float = 0.0
    budget: SharedBudget = field(default_factory=SharedBudget)
    calls: list[Call] = field(default_factory=list[Call])
    messages: dict[str, str] = field(default_factory=dict[str, str])
    order: list[str] = field(default_factory=list[str])  # message ids in chat order
    script: list[BaseException | None] = field(default_factory=list[BaseException | None])
    unmodified_edits: int = 0  # edits that would have failed with "message is not modified"
    connected: bool = False
    _on_message: OnMessage | None = None
    _changed: asyncio.Condition | None = None

    # -- ChatPlatform -------------------------------------------------------------------------
    async def connect(self, on_message: OnMessage) -> None:
        self._on_message = on_message
        self.connected = True

    async def disconnect(self) -> None:
        self.connected = False

    async def send(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        message_id = str(len(self.order) + 1)
        try:
            await self._call("send", chat_id, message_id, text, thread)
        except PlatformError as exc:
            if exc.maybe_landed:  # the message got through; only the answer was lost
                self.messages[message_id] = text
                self.order.append(message_id)
            raise
        self.messages[message_id] = text
        self.order.append(message_id)
        await self._notify()
        return message_id

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        if message_id not in self.messages:
            raise PlatformError(f"no message {message_id}")
        if self.messages[message_id] == text:
            self.unmodified_edits += 1
        await self._call("edit", chat_id, message_id, text, thread)
        self.messages[message_id] = text
        await self._notify()

    async def send_typing(self, chat_id: str, *, thread: Mapping[str, str] | None = None) -> None:
        self.calls.append(Call(self._now(), "typing", chat_id, "", "", dict(thread or {})))
        await self._notify()

    # -- test side ----------------------------------------------------------------------------
    async def deliver(self, message: IncomingMessage) -> None:
        assert self._on_message is not None, "connect() first"
        await self._on_message(message)

    def edits_and_sends(self, chat_id: str | None = None) -> list[Call]:
        return [
            c
            for c in self.calls
            if c.kind != "typing" and c.ok and (chat_id is None or c.chat_id == chat_id)
        ]

    def chat(self) -> list[str]:
        """The messages as the user sees them, in order."""
        return [self.messages[m] for m in self.order]

    async def wait_for(self, predicate: object, within: float = 10.0) -> None:
        assert callable(predicate)
        cond = self._condition()
        async with asyncio.timeout(within), cond:
            await cond.wait_for(predicate)  # type: ignore[arg-type]

    # -- internals ----------------------------------------------------------------------------
    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def _notify(self) -> None:
        cond = self._condition()
        async with cond:
            cond.notify_all()

    async def _call(
        self,
        kind: CallKind,
        chat_id: str,
        message_id: str,
        text: str,
        thread: Mapping[str, str] | None,
    ) -> None:
        start = self._now()
        outcome = self.script.pop(0) if self.script else None
        if self.latency:
            await asyncio.sleep(self.latency)
        call = Call(start, kind, chat_id, message_id, text, dict(thread or {}), outcome is None)
        self.calls.append(call)
        if outcome is not None:
            await self._notify()
            raise outcome

"""A virtual-time run of the real ``StreamConsumer``: timed events in, the chat's timeline out.

The consumer runs unchanged on an event loop whose clock jumps when every task waits
(tests/fakes/virtual_time.py), so cadence tests are exact and instant. ``outcomes`` scripts
what the platform answers per call, in call order: None (ok), ``RateLimited(s)`` or
``Failed(maybe)``; ``delays`` how long each call takes to reach the platform and then to be
answered (else ``latency``, arriving at once), so a test sees the calls as the platform counts
them (``SimCall.arrived``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

from iris.config import ResolvedDisplay
from iris.events import Event, TurnFailed
from iris.segments import SegmentClosed, segment_items
from iris.surfaces.chat.budget import RateBudget
from iris.surfaces.chat.consumer import StreamConsumer
from iris.surfaces.chat.platforms.base import (
    Capabilities,
    OnMessage,
    PlatformError,
    PlatformRateLimited,
)
from iris.surfaces.chat.reply import CURSOR
from iris.surfaces.chat.throttle import Throttle
from tests.fakes.virtual_time import run_virtual

TELEGRAM = Capabilities(
    can_edit=True, max_length=4096, length_unit="utf16", rate=RateBudget(1, 1.0)
)


@dataclass(frozen=True)
class RateLimited:
    retry_after: float


@dataclass(frozen=True)
class Failed:
    maybe_landed: bool = False


Outcome = RateLimited | Failed | None


@dataclass(frozen=True)
class SimCall:
    t: float
    kind: str  # "send" | "edit" | "cleanup" (an edit that only removes the cursor)
    message_id: str
    text: str
    ok: bool
    arrived: float = 0.0  # when the platform saw it (``t``: when it was sent)


@dataclass
class SimResult:
    calls: list[SimCall] = field(default_factory=list[SimCall])
    messages: dict[str, str] = field(default_factory=dict[str, str])
    order: list[str] = field(default_factory=list[str])
    end: float = 0.0

    def chat(self) -> list[str]:
        return [self.messages[m] for m in self.order]

    def ok_calls(self) -> list[SimCall]:
        return [c for c in self.calls if c.ok]


def display(**over: object) -> ResolvedDisplay:
    base: dict[str, object] = {
        "show_reasoning": False,
        "reasoning_style": "code",
        "tool_progress": "all",
        "edit_interval": 1.5,
        "buffer_threshold": 24,
        "min_tokens": 3,
    }
    base.update(over)
    return ResolvedDisplay.model_validate(base)


def deltas(
    words: list[str], *, start: float = 0.0, every: float = 0.1
) -> list[tuple[float, Event]]:
    from iris.events import TextDelta

    return [(start + i * every, TextDelta(w)) for i, w in enumerate(words)]


def simulate(
    events: list[tuple[float, Event]],
    *,
    caps: Capabilities = TELEGRAM,
    shown: ResolvedDisplay | None = None,
    preview: bool = True,
    budget: RateBudget | None = None,
    outcomes: list[Outcome] | None = None,
    latency: float = 0.05,
    horizon: float = 3600.0,
    delays: list[Delay] | None = None,
) -> SimResult:
    """Run the real ``StreamConsumer`` on virtual time against a scripted platform."""
    platform = SimPlatform(caps, list(outcomes or []), latency, list(delays or []))
    return run_virtual(_run(platform, events, shown or display(), preview, budget, horizon))


async def _run(
    platform: SimPlatform,
    events: list[tuple[float, Event]],
    shown: ResolvedDisplay,
    preview: bool,
    budget: RateBudget | None,
    horizon: float,
) -> SimResult:
    consumer = StreamConsumer(
        platform,
        "sim",
        display=shown,
        streaming=preview,
        throttle=Throttle(budget or platform.capabilities.rate, shown.edit_interval),
    )
    try:
        async with asyncio.timeout(horizon):
            await consumer.consume(timed(events))
    except TimeoutError:
        raise AssertionError(f"not settled after {horizon} virtual seconds") from None
    platform.result.end = asyncio.get_running_loop().time()
    return platform.result


async def timed(events: list[tuple[float, Event]]) -> AsyncIterator[Event]:
    """Each event when its time comes, as a model streams it."""
    loop = asyncio.get_running_loop()
    for at, event in sorted(events, key=lambda item: item[0]):
        await asyncio.sleep(max(0.0, at - loop.time()))
        yield event


@dataclass(frozen=True)
class Delay:
    """One call's way: ``there`` seconds until the platform sees it, ``back`` until its answer
    is in."""

    there: float
    back: float


class SimPlatform:
    """A chat platform whose calls take ``latency`` (or each its ``delays``) and answer as
    ``script`` says, in order."""

    name = "sim"

    def __init__(
        self,
        caps: Capabilities,
        script: list[Outcome],
        latency: float,
        delays: list[Delay] | None = None,
    ) -> None:
        self.capabilities = caps
        self.script = script
        self.latency = latency
        self.delays = delays or []
        self.result = SimResult()

    async def connect(self, on_message: OnMessage) -> None:
        raise NotImplementedError  # the sim only delivers

    async def disconnect(self) -> None:
        return None

    async def send(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        message_id = str(len(self.result.order) + 1)
        await self._call("send", message_id, text)
        return message_id

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        # An edit that only takes the cursor off what the message shows is the cursor cleanup.
        cleanup = self.result.messages.get(message_id) == text + CURSOR
        await self._call("cleanup" if cleanup else "edit", message_id, text)

    async def send_typing(self, chat_id: str, *, thread: Mapping[str, str] | None = None) -> None:
        return None  # not part of the chat's timeline

    async def _call(self, kind: str, message_id: str, text: str) -> None:
        result = self.result
        outcome = self.script.pop(0) if self.script else None
        loop = asyncio.get_running_loop()
        started = loop.time()
        delay = self.delays.pop(0) if self.delays else Delay(0.0, self.latency)
        await asyncio.sleep(delay.there)
        arrived = loop.time()
        await asyncio.sleep(delay.back)
        result.calls.append(SimCall(started, kind, message_id, text, outcome is None, arrived))
        match outcome:
            case None:
                result.messages[message_id] = text
                if kind == "send":
                    result.order.append(message_id)
            case RateLimited(retry_after=seconds):
                raise PlatformRateLimited(seconds)
            case Failed(maybe_landed=maybe):
                if maybe and kind == "send":
                    result.messages[message_id] = text
                    result.order.append(message_id)
                raise PlatformError("scripted failure", maybe_landed=maybe)


def visible(text: str) -> str:
    return text.removesuffix(CURSOR)


EMPTY = "…"  # what a message shows once its segment's final text no longer needs it


def final_texts(events: list[Event]) -> list[str]:
    return [i.text for i in segment_items(events) if isinstance(i, SegmentClosed) and i.text]


def shown_texts(chat: list[str], events: list[Event]) -> list[str]:
    """The chat's messages as text: without placeholders, and without the failure notice."""
    end = events[-1]
    notice = f"⚠️ {end.message}" if isinstance(end, TurnFailed) else None
    texts: list[str] = []
    for message in chat:
        if message in (EMPTY, notice):
            continue
        if notice is not None and message.endswith(f"\n\n{notice}"):
            message = message.removesuffix(f"\n\n{notice}")
        texts.append(message)
    return texts

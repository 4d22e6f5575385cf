"""The async consumer against a recording platform: settling, typing lease, failures, pacing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping

import pytest

from iris.events import (
    ApprovalRequested,
    ApprovalResolved,
    Event,
    SegmentEnded,
    TextDelta,
    ToolEnded,
    ToolStarted,
    TurnEnded,
)
from iris.surfaces.chat.budget import RateBudget
from iris.surfaces.chat.consumer import StreamConsumer
from iris.surfaces.chat.platforms.base import PlatformError, PlatformRateLimited
from iris.surfaces.chat.prompts import NO_BUTTONS, Prompts
from iris.surfaces.chat.reply import CURSOR
from iris.surfaces.chat.throttle import Throttle
from iris.surfaces.chat.typing_lease import TypingLease
from tests.chat.sim import display
from tests.fakes.recording_platform import RecordingPlatform

pytestmark = pytest.mark.timeout(15)

WORDS = [f"w{i} " for i in range(40)]
TEXT = "".join(WORDS)


def consumer_for(platform: RecordingPlatform, *, streaming: bool = True) -> StreamConsumer:
    shown = display(edit_interval=0.05, min_tokens=3)
    # A generous budget keeps this fast; cadence itself is tested on the virtual clock.
    throttle = Throttle(RateBudget(100, 1.0), shown.edit_interval)
    return StreamConsumer(
        platform, "c1", display=shown, streaming=streaming, throttle=throttle, thread={"t": "9"}
    )


async def paced(events: list[Event], pause: float = 0.005) -> AsyncIterator[Event]:
    for event in events:
        await asyncio.sleep(pause)  # the model's pace, not a wait for a result
        yield event


def whole_reply() -> list[Event]:
    return [*(TextDelta(w) for w in WORDS), SegmentEnded(TEXT), TurnEnded(TEXT)]


async def test_the_reply_is_streamed_then_settled_and_typing_stops() -> None:
    platform = RecordingPlatform()
    consumer = consumer_for(platform)
    outcome = await consumer.consume(paced(whole_reply()))
    assert isinstance(outcome, TurnEnded)
    assert platform.chat() == [TEXT]
    calls = platform.edits_and_sends()
    assert calls[0].kind == "send" and len(calls) >= 2
    assert all(c.text.endswith(CURSOR) for c in calls[:-1])
    assert all(c.thread == {"t": "9"} for c in platform.calls)
    assert any(c.kind == "typing" for c in platform.calls)
    assert not consumer.typing.active
    assert platform.unmodified_edits == 0


async def test_a_stream_that_breaks_keeps_the_text_says_so_and_stops_typing() -> None:
    async def broken() -> AsyncIterator[Event]:
        for w in WORDS[:10]:
            yield TextDelta(w)
        raise RuntimeError("provider exploded")

    platform = RecordingPlatform()
    consumer = consumer_for(platform)
    await consumer.consume(broken())
    assert platform.chat() == ["".join(WORDS[:10]) + "\n\n⚠️ The reply failed."]
    assert not consumer.typing.active


async def test_a_stream_that_stops_without_a_last_event_leaves_no_cursor() -> None:
    platform = RecordingPlatform()
    await consumer_for(platform).consume(paced([TextDelta(w) for w in WORDS]))
    assert platform.chat() == [TEXT]


async def test_adapter_failures_and_429s_do_not_lose_or_duplicate_the_reply() -> None:
    platform = RecordingPlatform(
        script=[RuntimeError("adapter bug"), None, PlatformRateLimited(0.1), PlatformError("x")]
    )
    await consumer_for(platform).consume(paced(whole_reply()))
    assert platform.chat() == [TEXT]


async def test_without_streaming_the_reply_is_sent_once() -> None:
    platform = RecordingPlatform()
    await consumer_for(platform, streaming=False).consume(paced(whole_reply()))
    assert [(c.kind, c.text) for c in platform.edits_and_sends()] == [("send", TEXT)]


async def test_a_slow_platform_never_slows_the_producer() -> None:
    platform = RecordingPlatform(latency=0.3)
    produced = asyncio.Event()

    async def fast() -> AsyncIterator[Event]:
        for event in whole_reply():
            if isinstance(event, TurnEnded):
                produced.set()  # the pump stops asking after the last event
            yield event

    consumer = consumer_for(platform)
    task = asyncio.create_task(consumer.consume(fast()))
    await produced.wait()
    # Every event was taken while the first platform call was still in flight.
    assert platform.edits_and_sends() == []
    await task
    assert platform.chat() == [TEXT]


async def test_the_typing_lease_has_a_hard_limit() -> None:
    platform = RecordingPlatform()
    async with TypingLease(platform, "c1", every=0.01, limit=0.1) as lease:
        async with asyncio.timeout(5):
            await lease.expired()  # nobody released it: the limit ended it
        count = len(platform.calls)
    assert not lease.active
    assert 2 <= count <= 12


async def test_releasing_the_lease_lets_a_typing_request_in_flight_finish() -> None:
    # Cancelling an HTTP request mid-flight leaks its pooled connection (httpx): after enough
    # turns the platform's pool was full and replies stopped. Release stops between requests.
    class SlowTyping(RecordingPlatform):
        def __init__(self) -> None:
            super().__init__()
            self.started, self.gate = asyncio.Event(), asyncio.Event()
            self.finished = 0

        async def send_typing(
            self, chat_id: str, *, thread: Mapping[str, str] | None = None
        ) -> None:
            self.started.set()
            await self.gate.wait()
            self.finished += 1

    platform = SlowTyping()
    async with asyncio.timeout(5):
        async with TypingLease(platform, "c1", every=60.0) as lease:
            await platform.started.wait()
            lease.release()
            platform.gate.set()
    assert platform.finished == 1
    assert not lease.active


async def test_a_request_on_a_platform_without_buttons_is_said_and_typing_pauses_meanwhile() -> (
    None
):
    platform = RecordingPlatform()  # no send_prompt: told in plain messages
    shown = display(edit_interval=0.05, min_tokens=3)
    consumer = StreamConsumer(
        platform,
        "c1",
        display=shown,
        streaming=True,
        throttle=Throttle(RateBudget(100, 1.0), shown.edit_interval),
        typing_every=0.01,
        prompts=Prompts(),
        session="telegram:c1",
    )
    asked = ApprovalRequested(1, "terminal", '{"command": "ls"}', "ls", "appr_1", time.time() + 60)
    answered = asyncio.Event()
    typing_while_waiting: list[int] = []

    async def events() -> AsyncIterator[Event]:
        yield ToolStarted(1, "terminal", {"command": "ls"})
        yield asked
        await asyncio.sleep(0.05)  # the note goes out, the last typing call lands
        before = sum(c.kind == "typing" for c in platform.calls)
        await asyncio.sleep(0.2)  # twenty typing periods
        typing_while_waiting.append(sum(c.kind == "typing" for c in platform.calls) - before)
        answered.set()
        yield ApprovalResolved("appr_1", "deny", "phone")
        yield ToolEnded(1, "terminal", False, 0.0, "not approved")
        yield TurnEnded("")

    await consumer.consume(events())
    assert answered.is_set()
    texts = [c.text for c in platform.edits_and_sends()]
    assert any("ls" in t and NO_BUTTONS in t for t in texts), texts
    assert any(t.startswith("❌ Denied by phone") for t in texts), texts
    assert typing_while_waiting == [0], "a turn waiting for a person is not typing"

"""The voice profile: Chat Completions answered for a speaker (Home Assistant's Assist).

A request for the model ``platforms.homeassistant.voice.model`` (``iris-voice``) is a turn of
the configured model with these differences, so what a person hears is an answer and nothing
else:

- an instruction asks for a short answer in plain spoken sentences;
- Iris's own tools are never offered (``bodies``); the client's tools (Assist's ``HassTurnOn``
  and friends) are passed back as client tool calls, streamed as they form;
- ``content`` is the answer's text with its Markdown taken out as it streams, never half a
  word at a time (``iris.formats.speech``); reasoning is never in it;
- if nothing of an answer (text or a tool call) has started ``voice.ack_after`` seconds after
  the request, the response is one short sentence saying the answer will follow (``ACK``) and
  ends; the turn goes on (``voice_later``: its Assist tools carried out through Home
  Assistant), and its answer is announced through the Home Assistant platform
  (``Runtime.house``: the satellite, else a notification; without the platform it is logged)
  — the turn holds its turn slots until then (``Slots``);
- a tool call that needs a person's yes (``voice.approval``) is never streamed: its name is
  known at its first fragment, and the response becomes one sentence, ``APPROVE`` (the turn
  goes on, asking the owner chat's devices) or, with no owner chat, ``REFUSED`` (the turn
  stops: nothing runs).

A client that leaves before the acknowledgement stops the turn, as any API client does.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable

from iris.agent.core import Agent, Turn, TurnRequest
from iris.events import (
    Commentary,
    Event,
    ReasoningDelta,
    SegmentEnded,
    StreamReset,
    TextDelta,
    ToolCallDelta,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.formats.speech import Speech
from iris.observability import TurnWatch
from iris.surfaces.api.voice_later import APPROVE, REFUSED, VoiceLater
from iris.tasks import Supervisor, logged

log = logging.getLogger("iris.api")

INSTRUCTIONS = (
    "You are answering through a voice assistant: what you write is read aloud. Answer in one "
    "to three short spoken sentences of plain text: no Markdown, no lists, no headings, no "
    "code, no emoji, no links. Say what you did or found; do not describe your reasoning."
)
ACK = "That takes a little longer; I'll send you the answer as a notification."
ACK_HERE = "That takes a little longer; I'll tell you here when I have the answer."  # satellite


def voice_request(request: TurnRequest) -> TurnRequest:
    """The turn a voice request runs: the instruction added, Iris's own tools off."""
    extra = f"{request.instructions}\n\n{INSTRUCTIONS}" if request.instructions else INSTRUCTIONS
    metadata = {**request.metadata, "profile": "voice"}
    return dataclasses.replace(
        request, instructions=extra, agent_tools=False, approvals=None, metadata=metadata
    )


def for_speech(request: TurnRequest) -> bool:
    """Is the answer spoken? Structured output (``response_format``) is data: never rewritten."""
    fmt = request.params.get("response_format")
    return not (isinstance(fmt, dict) and fmt.get("type") not in (None, "text"))  # pyright: ignore[reportUnknownMemberType]


class VoiceRun:
    """The exchange's view of one voice turn: its events for speech, or the one sentence that
    ends the response early (the acknowledgement, the approval's)."""

    def __init__(
        self, turn: Turn, request: TurnRequest, ack_after: float, later: VoiceLater
    ) -> None:
        self.turn = turn
        self.request = request
        self.ack_after = ack_after
        self.later = later
        self.events: asyncio.Queue[Event] = asyncio.Queue()
        self.acked = False  # the response ended before the answer: the turn goes on after it
        self.decided = asyncio.Event()  # the response has ended (``acked`` is final)
        self.sent: set[int] = set()  # the client tool calls streamed with the response

    @property
    def watch(self) -> TurnWatch:
        return self.turn.watch

    def interrupt(self) -> None:
        self.turn.interrupt()

    async def __aiter__(self) -> AsyncIterator[Event]:
        try:
            async for event in self._spoken():
                yield event
        finally:
            self.decided.set()

    async def deliver(self, sink: Callable[[Event], Awaitable[None]]) -> None:
        async for event in self:
            await sink(event)

    async def _spoken(self) -> AsyncIterator[Event]:
        speech = Spoken()
        deadline = asyncio.get_running_loop().time() + self.ack_after
        started = False
        while True:
            try:
                async with asyncio.timeout_at(None if started else deadline):
                    event = await self.events.get()
            except TimeoutError:
                self.acked = True
                spoken_here = self.later.settings.satellite is not None
                for ack in speech.end_with(ACK_HERE if spoken_here else ACK):
                    yield ack
                return
            for out in speech.feed(event):
                if isinstance(out, ToolCallDelta) and out.name:  # a call's first fragment
                    if await self.later.needs_approval(out.name):
                        self.acked = self.later.can_ask()
                        for said in speech.end_with(APPROVE if self.acked else REFUSED):
                            yield said
                        return
                    self.sent.add(out.index)
                started = started or _begun(out)
                yield out
            if isinstance(event, TurnEnded | TurnFailed):
                return


def _begun(event: Event) -> bool:
    """Has an answer begun: text a person would hear, or a tool call?"""
    if isinstance(event, TextDelta):
        return bool(event.text.strip())
    return isinstance(event, ToolCallDelta)


class Spoken:
    """A turn's events as a speaker gets them: text without Markdown (whole words), each
    segment's closing text what was streamed of it, no reasoning, no agent tool events."""

    def __init__(self) -> None:
        self._speech = Speech()
        self._segment = ""  # what was sent of the open segment
        self._last = ""  # the last closed segment's text

    def feed(self, event: Event) -> list[Event]:
        match event:
            case TextDelta(text=text):
                return self._text(self._speech.feed(text))
            case SegmentEnded() | Commentary():
                rest, said = self._close()
                return [*rest, dataclasses.replace(event, text=said)]
            case TurnEnded():
                rest, _ = self._close()
                return [*rest, dataclasses.replace(event, text=self._last)]
            case StreamReset():
                self._speech, self._segment = Speech(), ""
                return [event]
            case ReasoningDelta():
                return []
            case TurnStarted() | ToolCallDelta() | TurnFailed():
                return [event]
            case _:
                return []  # the agent's own tools and approvals: none are offered here

    def end_with(self, sentence: str) -> list[Event]:
        """The response's end: what was said of the open segment, then ``sentence`` alone."""
        rest, said = self._close()
        closed: list[Event] = [SegmentEnded(said)] if said else []
        return [
            *rest,
            *closed,
            TextDelta(sentence),
            SegmentEnded(sentence),
            TurnEnded(text=sentence, reason="stop"),
        ]

    def _text(self, text: str) -> list[Event]:
        if not text:
            return []
        self._segment += text
        return [TextDelta(text)]

    def _close(self) -> tuple[list[Event], str]:
        """The rest of the open segment, and all that was said of it."""
        rest = self._text(self._speech.end())
        said = self._segment
        if said:
            self._last = said  # the answer: the last segment that said something
        self._segment, self._speech = "", Speech()
        return rest, said


class Slots:
    """A voice turn's hold on its API and server turn slots (``server.max_turns`` counts the
    turn, not its response): the exchange gives them back as its response ends, unless the
    turn goes on after it (``goes_on``), in which case the turn gives them back at its end."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = release
        self.goes_on: Callable[[], bool] = lambda: False

    def after_response(self) -> None:
        """The exchange's release (as the response's last event goes out)."""
        if not self.goes_on():
            self.free()

    def free(self) -> None:
        if self._release is not None:
            release, self._release = self._release, None
            release()


@dataclasses.dataclass
class VoiceTurns:
    """Runs voice turns; one whose response ended early goes on here (``voice_later``)."""

    agent: Agent
    ack_after: float
    later: VoiceLater
    _turns: Supervisor = dataclasses.field(default_factory=Supervisor)

    @contextlib.asynccontextmanager
    async def source(self, request: TurnRequest, slots: Slots) -> AsyncGenerator[VoiceRun]:
        """The exchange's ``source``: the turn runs in a task of its own, so it can outlive
        the response (holding ``slots`` until it ends)."""
        run = VoiceRun(self.agent.run(request), request, self.ack_after, self.later)
        slots.goes_on = lambda: run.acked  # decided before the response's last event
        self._turns.create_task(logged(self._drive(run, slots), "voice turn"), name="voice turn")
        try:
            yield run
        finally:
            run.decided.set()
            if not run.acked:
                run.turn.interrupt()  # the client is done with it (or left)

    async def _drive(self, run: VoiceRun, slots: Slots) -> None:
        final: Event | None = None
        try:
            async with run.turn as turn:
                async for event in turn:
                    run.events.put_nowait(event)
                    final = event
        except Exception:
            log.exception("voice turn failed outside its events")
            run.events.put_nowait(TurnFailed("internal_error", "The turn failed."))
        try:
            await run.decided.wait()  # a turn that ends as its response ends: acked or not
            if run.acked:
                await self.later.finish(run.request, final, run.sent)
        finally:
            slots.free()

    async def stop(self) -> None:
        await self._turns.close()  # cancels what still runs, awaits all

"""Responses turns that wait for an approval between two HTTP requests (``/v1/responses``).

As OpenAI's API does: a tool call that asks (``tools.approval``) ends the response that is
streaming with an ``mcp_approval_request`` output item, status ``completed``; the turn itself
is *held* here, waiting in the approvals broker. The client answers with a new request:
``previous_response_id`` of that response and an ``mcp_approval_response`` input item
(``approval_request_id``, ``approve``). That request's response carries on the same turn: the
tool runs (or is refused, and the model is told), the model answers, and the response ends as
any other — or with the next ``mcp_approval_request``.

A ``HeldTurn`` runs its turn in a task of this process's ``HeldTurns`` group (not in one HTTP
exchange's), and hands its events to one exchange at a time (a ``Leg``). A leg ends after its
``ApprovalRequested`` (the turn is parked: registered under the request's id) or the turn's
terminal event; a client that leaves mid-leg interrupts the turn, as on any response.

Limits (finding 2 of the third hardening pass: held turns escaped them): a held turn starts
only once admitted under ``max_concurrent`` / ``server.max_turns``, and its first leg holds
those slots; parked, it gives them back (it waits on a person, not on the model) and takes
them again before it goes on, so an answer that finds none is a 429 and the turn stays parked.
At most ``max_held_turns`` are held at once (429 ``too_many_held_turns`` past it). A parked
turn nobody answers ends at the approval's timeout (``TurnRequest.unanswered_ends``): nobody
is attached to see the model told so, so it is not called again, and a late answer is told
the request ended (``approval_decided``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, cast

from iris.agent.core import Agent, Turn, TurnRequest
from iris.events import (
    ApprovalRequested,
    ApprovalResolved,
    Event,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.observability import TurnWatch
from iris.surfaces.api.bodies import ResponsesCall
from iris.surfaces.api.problems import bad_request
from iris.tasks import OpenGroup

log = logging.getLogger("iris.api")

APPROVED_BY = "api"  # who answered, in ApprovalResolved: the API's (authenticated) caller
Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ApprovalAnswer:
    """A request that answers an approval: its one ``mcp_approval_response`` item."""

    approval_id: str
    approve: bool
    previous_response_id: str
    stream: bool
    item: Json


def approval_answer(body: object) -> ApprovalAnswer | None:
    """The approval a ``/v1/responses`` body answers; None when it answers none. A body that
    mixes one with other input, or spells it wrong, is a 400 naming the field."""
    if not isinstance(body, dict):
        return None
    data = cast(Json, body)
    raw = data.get("input")
    if not isinstance(raw, list):
        return None
    items = cast(list[Any], raw)
    answers = [i for i in items if isinstance(i, dict) and i.get("type") == ANSWER]  # pyright: ignore[reportUnknownMemberType]
    if not answers:
        return None
    if len(answers) != 1 or len(items) != 1:
        raise bad_request(
            f"send one {ANSWER} item alone: a held turn waits for one tool call at a time",
            param="input",
            code="invalid_value",
        )
    item = cast(Json, answers[0])
    approval_id = _required_text(
        item,
        "approval_request_id",
        f"an {ANSWER} item needs 'approval_request_id'",
        param="input[0].approval_request_id",
    )
    approve = item.get("approve")
    if not isinstance(approve, bool):
        raise bad_request(
            f"an {ANSWER} item needs 'approve': true or false",
            param="input[0].approve",
            code="invalid_value",
        )
    previous = _required_text(
        data,
        "previous_response_id",
        f"an {ANSWER} goes with 'previous_response_id': the response that asked",
        param="previous_response_id",
    )
    stream = data.get("stream") is True
    return ApprovalAnswer(approval_id, approve, previous, stream, item)


def _required_text(data: Json, key: str, message: str, *, param: str) -> str:
    """``data[key]`` when it is a non-empty string, else a missing_required_parameter error."""
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise bad_request(message, param=param, code="missing_required_parameter")
    return value


ANSWER = "mcp_approval_response"


@dataclass
class Parked:
    """Where a held turn waits: the response that asked, and what it asked."""

    response_id: str
    request: ApprovalRequested


class HeldTurn:
    def __init__(
        self, turns: HeldTurns, agent: Agent, request: TurnRequest, call: ResponsesCall
    ) -> None:
        self._turns = turns
        self.call = call  # the request that began the turn: what every leg's response stores
        self.turn: Turn = agent.run(request)
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self.parked: Parked | None = None
        self.attached = False  # a leg of this process answers the request it is parked on
        self.ended = False
        self._task = turns.group.create_task(self._pump(), name=f"held {self.turn.turn_id}")

    async def _pump(self) -> None:
        try:
            async with self.turn as turn:
                async for event in turn:
                    if self._answered_elsewhere(event):
                        self.attached = True
                        self._turns.elsewhere(self)  # a leg for that answer, followed there
                    self._events.put_nowait(event)
        finally:
            self.ended = True
            self._turns.forget(self)

    def _answered_elsewhere(self, event: Event) -> bool:
        """Parked, the turn goes on though no leg here took the answer: another process
        answered (``store.url``)."""
        return (
            self.parked is not None
            and not self.attached
            and isinstance(event, ApprovalResolved)
            and event.decision in ("once", "chat", "deny")
        )

    def leg(self, response_id: str) -> Leg:
        """The part of the turn one response shows (``response_id``: that response's)."""
        return Leg(self, response_id)

    def interrupt(self) -> None:
        self.turn.interrupt()

    async def next_event(self) -> Event:
        return await self._events.get()


class Leg:
    """One exchange's view of a held turn: an event source for ``TurnExchange``."""

    def __init__(self, held: HeldTurn, response_id: str) -> None:
        self.held = held
        self.response_id = response_id
        self._done = False  # the leg reached its end (parked or the turn's end)
        self._resumed = held.parked is not None

    @property
    def watch(self) -> TurnWatch:
        return self.held.turn.watch

    def interrupt(self) -> None:
        self.held.interrupt()

    async def __aenter__(self) -> Leg:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._done:  # the client left mid-leg: the turn ends, as any response's would
            self.held.interrupt()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def deliver(self, sink: Callable[[Event], Awaitable[None]]) -> None:
        async for event in self._events():
            await sink(event)

    async def _events(self) -> AsyncIterator[Event]:
        held = self.held
        if self._resumed:
            held.parked = None
            # A new response begins mid-turn: it opens as any response does.
            yield TurnStarted(held.turn.turn_id, held.turn.agent.model_name)
        while True:
            event = await held.next_event()
            if isinstance(event, ApprovalRequested):
                held.parked = Parked(self.response_id, event)
                held.attached = False
                held._turns.park(event.approval_id, held)  # pyright: ignore[reportPrivateUsage]
                self._done = True
                yield event
                return
            if isinstance(event, TurnEnded | TurnFailed):
                self._done = True
                yield event
                return
            yield event


class HeldTurns:
    """This process's held Responses turns, by the approval request each is parked on."""

    def __init__(self, elsewhere: Callable[[HeldTurn], None] | None = None) -> None:
        self.group = OpenGroup()
        self._parked: dict[str, HeldTurn] = {}
        self._all: set[HeldTurn] = set()
        # A parked turn another process answered: it goes on here, its leg followed there.
        self._elsewhere = elsewhere

    def elsewhere(self, held: HeldTurn) -> None:
        if self._elsewhere is not None:
            self._elsewhere(held)

    async def start(self) -> None:
        await self.group.open()

    async def stop(self) -> None:
        """Shutdown: every held turn ends now, as interrupted."""
        for held in list(self._all):
            held.interrupt()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(3.0):
                await self.group.close()

    def run(self, agent: Agent, request: TurnRequest, call: ResponsesCall) -> HeldTurn:
        held = HeldTurn(self, agent, request, call)
        self._all.add(held)
        return held

    def park(self, approval_id: str, held: HeldTurn) -> None:
        self._prune()
        self._parked[approval_id] = held

    def take(self, approval_id: str) -> HeldTurn | None:
        """The turn parked on ``approval_id`` (it is no longer parked on it)."""
        self._prune()
        return self._parked.pop(approval_id, None)

    def forget(self, held: HeldTurn) -> None:
        self._all.discard(held)

    @property
    def count(self) -> int:
        """Held turns not ended yet (running a leg, or parked on a request)."""
        return len(self._all)

    def _prune(self) -> None:
        for approval_id, held in list(self._parked.items()):
            if held.ended:  # ended at its timeout: the broker tells a late answer so
                del self._parked[approval_id]

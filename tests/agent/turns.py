"""Running one agent turn in a test: its events, collected to the end."""

from __future__ import annotations

from iris.agent import Agent, TurnRequest
from iris.events import Event, TextDelta

USER = [{"role": "user", "content": "hi"}]


async def collect(agent: Agent, request: TurnRequest) -> list[Event]:
    events: list[Event] = []
    async with agent.run(request) as turn:
        async for event in turn:
            events.append(event)
    return events


def texts(events: list[Event]) -> str:
    """The visible text the turn streamed."""
    return "".join(e.text for e in events if isinstance(e, TextDelta))

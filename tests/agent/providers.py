"""Both providers against the scripted upstream, and one turn through the agent, for the fault tests."""

from __future__ import annotations

from iris.agent import Agent, TurnRequest
from iris.events import Event
from tests.agent.turns import collect
from tests.conftest import MakeConfig
from tests.fakes.upstream import (
    FakeUpstream,
)

PROVIDERS = ["chat_completions", "responses"]


async def run_turn(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    provider: str,
    request: TurnRequest,
    **model: object,
) -> list[Event]:
    """One turn on a fresh agent for ``provider``; its events."""
    agent = make_agent(make_config, upstream, provider, **model)
    try:
        return await collect(agent, request)
    finally:
        await agent.aclose()


def make_agent(
    make_config: MakeConfig, upstream: FakeUpstream, provider: str, **model: object
) -> Agent:
    return Agent(
        make_config(upstream.base_url, model={"provider": provider, **model}, tools={"enabled": []})
    )

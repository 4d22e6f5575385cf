"""The agent acting on the house: ``ha_states`` and ``ha_call_service`` over the platform's
connection to the Home Assistant stand-in, in a real turn with the real approvals broker.

What a person would notice: reading states never asks; switching a light asks first, showing
the service, the target and the data, and happens exactly once after an allow and never after
a deny; nothing outside ``expose`` is read or touched.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from iris.agent.core import TurnRequest
from iris.events import ApprovalRequested, Event, TurnEnded
from iris.surfaces.chat.platforms.homeassistant import HomeAssistantPlatform
from iris.surfaces.chat.runner import ChatSurface
from tests.chat.harness import platform_config, running
from tests.conftest import MakeConfig
from tests.fakes.homeassistant import HomeAssistant
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(30)

CHAT = "iris:owner"
LIGHT_ON = {
    "domain": "light",
    "service": "turn_on",
    "entity_id": "light.kitchen",
    "data": {"brightness_pct": 50},
}


@pytest.fixture
async def ha() -> AsyncIterator[HomeAssistant]:
    states = {"light.kitchen": "off", "lock.front": "locked", "sensor.power": "120"}
    async with HomeAssistant(states=states) as fake:
        yield fake


async def house(
    make_config: MakeConfig, upstream: FakeUpstream, ha: HomeAssistant, mode: str = "ask"
) -> AsyncIterator[ChatSurface]:
    settings = {"url": ha.url, "token": ha.token, "expose": ["light.*", "sensor.power"]}
    config = platform_config(make_config, upstream, "homeassistant", settings)
    config = config.model_copy(
        update={"tools": config.tools.model_copy(update={"approval": _approval(config, mode)})}
    )
    platform = HomeAssistantPlatform(config.platforms.homeassistant)
    async with running(config, [platform]) as surface:
        yield surface


def _approval(config: Any, mode: str) -> Any:
    return config.tools.approval.model_copy(update={"mode": mode})


async def turn(surface: ChatSurface, ask: str, decision: str | None = None) -> list[Event]:
    """One turn asking ``ask``; an approval it requests is answered ``decision``."""
    runtime = surface.runtime
    request = TurnRequest(
        messages=[{"role": "user", "content": ask}], approvals=runtime.approvals, chat_id=CHAT
    )
    events: list[Event] = []
    async with runtime.agent.run(request) as running_turn:
        async for event in running_turn:
            events.append(event)
            if isinstance(event, ApprovalRequested):
                assert decision is not None, f"asked unexpectedly: {event.preview}"
                await runtime.approvals.respond(
                    event.approval_id,
                    decision,
                    "ada",
                    chat_id=CHAT,  # pyright: ignore[reportArgumentType]
                )
    return events


def tool_result(upstream: FakeUpstream) -> str:
    return str(upstream.requests[1].body["messages"][-1]["content"])


async def test_a_service_call_asks_with_service_target_and_data_and_runs_once_allowed(
    make_config: MakeConfig, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    upstream.script(tool_call("ha_call_service", [json.dumps(LIGHT_ON)]), text("Done."))
    async for surface in house(make_config, upstream, ha):
        events = await turn(surface, "Kitchen light to half, please", "once")
    [asked] = [e for e in events if isinstance(e, ApprovalRequested)]
    assert asked.preview.startswith("light.turn_on → light.kitchen\n")
    assert '"brightness_pct": 50' in asked.preview and "Home Assistant at" in asked.preview
    [call] = ha.service_calls
    assert call["target"] == {"entity_id": ["light.kitchen"]}
    assert call["service_data"] == {"brightness_pct": 50}
    assert ha.states["light.kitchen"] == "on"
    assert isinstance(events[-1], TurnEnded) and events[-1].text == "Done."


async def test_a_denied_service_call_never_reaches_the_house(
    make_config: MakeConfig, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    upstream.script(tool_call("ha_call_service", [json.dumps(LIGHT_ON)]), text("Not allowed."))
    async for surface in house(make_config, upstream, ha):
        await turn(surface, "Kitchen light on", "deny")
    assert ha.service_calls == [] and ha.states["light.kitchen"] == "off"
    assert "not approved" in tool_result(upstream)


async def test_reading_states_never_asks_and_shows_only_what_is_exposed(
    make_config: MakeConfig, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    upstream.script(tool_call("ha_states", ["{}"]), text("All quiet."))
    async for surface in house(make_config, upstream, ha):
        events = await turn(surface, "How is the house?")
    assert not any(isinstance(e, ApprovalRequested) for e in events)
    seen = tool_result(upstream)
    assert "light.kitchen" in seen and "sensor.power" in seen and "lock.front" not in seen
    assert "ha_states" in [t["function"]["name"] for t in upstream.requests[0].body["tools"]]


async def test_an_entity_not_exposed_is_refused_before_anything_is_sent(
    make_config: MakeConfig, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    unlock = {"domain": "lock", "service": "unlock", "entity_id": "lock.front"}
    upstream.script(tool_call("ha_call_service", [json.dumps(unlock)]), text("I can't."))
    async for surface in house(make_config, upstream, ha, mode="off"):
        await turn(surface, "Unlock the front door")
    assert ha.service_calls == [] and ha.states["lock.front"] == "locked"
    assert "not exposed" in tool_result(upstream)

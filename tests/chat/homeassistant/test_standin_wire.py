"""The Home Assistant stand-in speaks what a real Home Assistant client expects.

``hass-client`` (a client library written against the real WebSocket API, used by Music
Assistant) talks to ``tests/fakes/homeassistant.py`` here: its auth handshake, command ids and
``result`` frames, ``get_states``, ``subscribe_events`` and ``call_service`` all parse as that
library parses Home Assistant's own frames, so the platform's tests, which run against the
stand-in, test Iris against the protocol and not against a shape of our own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from hass_client import HomeAssistantClient
from hass_client.exceptions import AuthenticationFailed, FailedCommand

from tests.fakes.homeassistant import VERSION, HomeAssistant

pytestmark = pytest.mark.timeout(30)


@contextlib.asynccontextmanager
async def client(ha: HomeAssistant, token: str) -> AsyncGenerator[HomeAssistantClient]:
    """A connected, listening ``hass-client`` client of the stand-in."""
    hass = HomeAssistantClient(f"ws://127.0.0.1:{ha.port}/api/websocket", token)
    await hass.connect()
    listening = asyncio.create_task(hass.start_listening())
    try:
        yield hass
    finally:
        await hass.disconnect()
        await asyncio.wait([listening], timeout=5)


async def test_a_real_client_authenticates_reads_states_and_hears_a_change() -> None:
    async with (
        HomeAssistant(states={"binary_sensor.front_door": "off", "light.kitchen": "off"}) as ha,
        client(ha, ha.token) as hass,
    ):
        assert hass.version == VERSION
        states = {s["entity_id"]: s for s in await hass.get_states()}
        assert states["binary_sensor.front_door"]["state"] == "off"
        assert {"attributes", "last_changed", "last_updated", "context"} <= set(
            states["light.kitchen"]
        )

        heard: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        await hass.subscribe_events(lambda e: heard.put_nowait(dict(e)), "state_changed")
        await ha.set_state("binary_sensor.front_door", "on")
        event = await asyncio.wait_for(heard.get(), 10)
        assert event["event_type"] == "state_changed"
        data = event["data"]
        assert data["entity_id"] == "binary_sensor.front_door"
        assert (data["old_state"]["state"], data["new_state"]["state"]) == ("off", "on")


async def test_a_real_clients_service_call_is_done_and_an_unknown_one_fails_by_code() -> None:
    async with (
        HomeAssistant(states={"light.kitchen": "off"}) as ha,
        client(ha, ha.token) as hass,
    ):
        await hass.call_service("light", "turn_on", target={"entity_id": "light.kitchen"})
        assert ha.states["light.kitchen"] == "on"
        assert ha.service_calls[-1]["target"] == {"entity_id": "light.kitchen"}
        with pytest.raises(FailedCommand) as failed:
            await hass.call_service("light", "turn_on", target={"entity_id": "light.cellar"})
        assert "not found" in str(failed.value) and "light.cellar" in str(failed.value)
        assert ha.errors[-1]["error"]["code"] == "not_found"


async def test_a_real_client_with_a_wrong_token_is_refused_at_auth() -> None:
    async with HomeAssistant() as ha:
        hass = HomeAssistantClient(f"ws://127.0.0.1:{ha.port}/api/websocket", "wrong-token")
        with pytest.raises(AuthenticationFailed):
            await hass.connect()
        await hass.disconnect()
        assert ha.connections == 0

"""Home Assistant end to end: the adapter against the stand-in of its WebSocket and REST APIs
over real sockets, the real agent streaming from a scripted upstream.

A watched entity's change reaches the agent as a message in the house's one chat; the answer
comes back as one notification, whole, under the conversation's notification id; a burst is one
message; a lost connection is reconnected and resubscribed, and what changed meanwhile is said
once; a refused token is a one-line start error naming the setting; a failing notify call is
retried and logged once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from iris.surfaces.chat.platforms.base import PlatformError
from iris.surfaces.chat.platforms.homeassistant import HomeAssistantPlatform, notification_id
from iris.surfaces.chat.runner import ChatSurface
from tests.chat.harness import platform_config, running
from tests.conftest import MakeConfig
from tests.fakes.homeassistant import HomeAssistant
from tests.fakes.upstream import FakeUpstream, drop, text, tool_call

pytestmark = pytest.mark.timeout(30)

STATES = {
    "binary_sensor.front_door": "off",
    "light.hall": "off",
    "sensor.power": "120",
    "binary_sensor.front_door_battery": "ok",
}


@pytest.fixture
async def ha() -> AsyncIterator[HomeAssistant]:
    async with HomeAssistant(states=dict(STATES)) as fake:
        yield fake


def settings(ha: HomeAssistant, **over: Any) -> dict[str, Any]:
    return {
        "url": ha.url,
        "token": ha.token,
        "debounce": 0.2,
        "watch": {
            "entities": ["binary_sensor.front_*", "light.hall"],
            "ignore": ["*_battery"],
            "cooldown": 0.0,
        },
        **over,
    }


async def start(
    make_config: MakeConfig, upstream: FakeUpstream, ha: HomeAssistant, **over: Any
) -> AsyncIterator[tuple[ChatSurface, HomeAssistantPlatform]]:
    config = platform_config(make_config, upstream, "homeassistant", settings(ha, **over))
    platform = HomeAssistantPlatform(config.platforms.homeassistant)
    platform.backoff = (0.05,)
    platform.notify_backoff = (0.05, 0.05, 0.05)
    async with running(config, [platform]) as surface:
        yield surface, platform


@pytest.fixture
async def house(
    make_config: MakeConfig, upstream: FakeUpstream, ha: HomeAssistant
) -> AsyncIterator[tuple[ChatSurface, HomeAssistantPlatform]]:
    async for started in start(make_config, upstream, ha):
        yield started


def user_texts(upstream: FakeUpstream) -> list[str]:
    return [str(r.body["messages"][-1]["content"]) for r in upstream.requests]


async def test_a_state_change_reaches_the_agent_and_one_whole_notification_comes_back(
    house: tuple[ChatSurface, HomeAssistantPlatform], ha: HomeAssistant, upstream: FakeUpstream
) -> None:
    surface, _ = house
    upstream.script(text("The front ", "door ", "opened ", "while ", "nobody ", "is home."))
    await ha.set_state("binary_sensor.front_door", "on")
    await ha.wait_until(lambda: ha.notifications)
    await surface.idle()

    [asked] = user_texts(upstream)
    assert "Front Door (binary_sensor.front_door) changed from off to on" in asked
    [note] = ha.notifications  # never a half answer first: one call, the whole text
    assert (note.domain, note.service) == ("persistent_notification", "create")
    assert note.data == {
        "title": "Iris",
        "message": "The front door opened while nobody is home.",
        "notification_id": notification_id("home"),
    }
    # The handshake and the commands, as Home Assistant's API takes them.
    auth = ha.frames[0]
    assert auth == {"type": "auth", "access_token": ha.token}
    subscribe = ha.sent("subscribe_events")[0]
    assert subscribe["event_type"] == "state_changed" and isinstance(subscribe["id"], int)
    assert ha.errors == []


async def test_unwatched_and_ignored_entities_say_nothing(
    house: tuple[ChatSurface, HomeAssistantPlatform], ha: HomeAssistant, upstream: FakeUpstream
) -> None:
    surface, platform = house
    await ha.set_state("sensor.power", "3000")  # not watched
    await ha.set_state("binary_sensor.front_door_battery", "low")  # ignored
    upstream.script(text("Hall light on."))
    await ha.set_state("light.hall", "on")
    await ha.wait_until(lambda: ha.notifications)
    await surface.idle()
    [asked] = user_texts(upstream)
    assert "light.hall" in asked and "power" not in asked and "battery" not in asked


async def test_a_burst_of_one_entity_is_one_message_from_first_to_last(
    house: tuple[ChatSurface, HomeAssistantPlatform], ha: HomeAssistant, upstream: FakeUpstream
) -> None:
    surface, _ = house
    upstream.script(text("Noted."))
    for state in ("on", "off", "on", "off", "on"):
        await ha.set_state("binary_sensor.front_door", state)
    await ha.wait_until(lambda: ha.notifications)
    await surface.idle()
    [asked] = user_texts(upstream)
    assert asked.count("front_door") == 1 and "changed from off to on" in asked
    assert len(ha.notifications) == 1


async def test_after_a_reconnect_it_resubscribes_and_says_what_changed_meanwhile_once(
    house: tuple[ChatSurface, HomeAssistantPlatform], ha: HomeAssistant, upstream: FakeUpstream
) -> None:
    surface, platform = house
    assert ha.subscriptions == 1
    ha.quietly("light.hall", "on")  # an event that never reached Iris
    connected = ha.connections
    await ha.drop()
    upstream.script(text("The hall light came on while I was away."))
    await ha.wait_until(lambda: ha.subscriptions == 2 and ha.connections == connected + 1)
    await ha.wait_until(lambda: ha.notifications)
    await surface.idle()
    [asked] = user_texts(upstream)
    assert "Hall (light.hall) changed from off to on while Iris was not connected" in asked
    # Resubscribed on the new connection: a later change arrives as ever.
    upstream.script(text("Door open."))
    await ha.set_state("binary_sensor.front_door", "on")
    await ha.wait_until(lambda: len(ha.notifications) == 2)
    await surface.idle()
    assert len(upstream.requests) == 2  # nothing replayed
    assert platform.connected.is_set()


async def test_an_unanswered_ping_counts_as_a_lost_connection(
    make_config: MakeConfig, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    async for _, platform in start(make_config, upstream, ha):
        platform.ping_every, platform.ping_timeout = 0.05, 0.1
        ha.mute = True  # half-open: nothing is answered
        await ha.wait_until(lambda: ha.sent("ping"))
        ha.mute = False
        await ha.wait_until(lambda: ha.connections == 2 and ha.subscriptions == 2)
        assert ha.errors == []


async def test_a_refused_token_is_a_one_line_start_error_naming_the_setting(
    ha: HomeAssistant, make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    config = platform_config(
        make_config, upstream, "homeassistant", settings(ha, token="", token_env="HASS_TOKEN")
    )
    section = config.platforms.homeassistant.model_copy(update={"token": "wrong"})
    platform = HomeAssistantPlatform(section)
    with pytest.raises(PlatformError) as refused:
        await platform.connect(_nothing)
    message = str(refused.value)
    assert "\n" not in message and "platforms.homeassistant.token" in message
    assert "Invalid access token" in message
    await platform.disconnect()


async def test_an_empty_token_names_the_environment_variable(
    make_config: MakeConfig, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    config = platform_config(make_config, upstream, "homeassistant", settings(ha, token=""))
    with pytest.raises(PlatformError, match=r"platforms\.homeassistant\.token \(or \$HASS_TOKEN\)"):
        HomeAssistantPlatform(config.platforms.homeassistant)


async def test_a_failing_notify_call_is_retried_and_logged_once(
    house: tuple[ChatSurface, HomeAssistantPlatform],
    ha: HomeAssistant,
    upstream: FakeUpstream,
    caplog: pytest.LogCaptureFixture,
) -> None:
    surface, _ = house
    ha.fail_next(2)
    upstream.script(text("Door open."))
    with caplog.at_level(logging.INFO, "iris.surfaces.chat.platforms.homeassistant"):
        await ha.set_state("binary_sensor.front_door", "on")
        await ha.wait_until(lambda: ha.notifications)
        await surface.idle()
    assert ha.rest_calls == 3 and len(ha.notifications) == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "retrying" in warnings[0].getMessage()


async def test_a_notify_service_gets_the_tag_and_tool_progress_never_shows(
    make_config: MakeConfig, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    upstream.script(
        tool_call("clock", ["{}"], content="Let me look. "),
        text("It is ", "late; ", "the door is open."),
    )
    async for surface, _ in start(make_config, upstream, ha, notify="notify.mobile_app_pixel"):
        await ha.set_state("binary_sensor.front_door", "on")
        await ha.wait_until(lambda: len(upstream.requests) == 2)
        await surface.idle()
    assert all(n.service == "mobile_app_pixel" for n in ha.notifications)
    last = ha.notifications[-1]
    assert last.data["data"] == {"tag": notification_id("home")}
    # What stays under the tag is the whole answer; no tool line was ever sent.
    assert ha.shown[notification_id("home")].endswith("the door is open.")
    assert not any("clock" in n.message for n in ha.notifications)


async def _nothing(message: object) -> None:
    return None


async def test_an_answer_that_breaks_midway_never_arrives_half(
    house: tuple[ChatSurface, HomeAssistantPlatform], ha: HomeAssistant, upstream: FakeUpstream
) -> None:
    surface, _ = house
    upstream.script(drop("The front door ", "is open and the"))
    await ha.set_state("binary_sensor.front_door", "on")
    await ha.wait_until(lambda: ha.notifications)
    await surface.idle()
    [note] = ha.notifications  # the failure, said once; none of the text so far
    assert "is open and the" not in note.message and "⚠️" in note.message


async def test_a_refused_token_from_the_environment_names_token_env(
    ha: HomeAssistant,
    make_config: MakeConfig,
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HASS_TOKEN", "revoked")
    config = platform_config(make_config, upstream, "homeassistant", settings(ha, token=""))
    platform = HomeAssistantPlatform(config.platforms.homeassistant)
    with pytest.raises(PlatformError) as refused:
        await platform.connect(_nothing)
    assert str(refused.value) == (
        "homeassistant: platforms.homeassistant.token_env ($HASS_TOKEN) was refused: "
        "Invalid access token"
    )
    assert ha.connections == 0
    await platform.disconnect()

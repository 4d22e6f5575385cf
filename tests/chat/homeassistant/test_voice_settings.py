"""``platforms.homeassistant.voice``: a satellite that is not one, or an owner chat no iris
device could open, is a config error that names the key, before anything starts."""

from __future__ import annotations

import pytest

from iris.config import config_from_dict
from iris.errors import ConfigError


def voice(**settings: object) -> dict[str, object]:
    return {"platforms": {"homeassistant": {"voice": settings}}}


@pytest.mark.parametrize("satellite", ["media_player.kitchen", "assist_satellite.", "Kitchen"])
def test_a_satellite_that_is_no_assist_satellite_entity_is_refused_by_name(satellite: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config_from_dict(voice(satellite=satellite), env={})
    assert "platforms.homeassistant.voice.satellite" in str(refused.value)
    assert "assist_satellite.<name>" in str(refused.value)


@pytest.mark.parametrize("chat", ["my chat", "", "main/kitchen", "x" * 129])
def test_an_owner_chat_no_device_could_open_is_refused_by_name(chat: str) -> None:
    # Its approvals would go to a chat no device can join: every one would time out unseen.
    with pytest.raises(ConfigError) as refused:
        config_from_dict(voice(owner_chat=chat), env={})
    assert "platforms.homeassistant.voice.owner_chat" in str(refused.value)
    assert "chat id" in str(refused.value)


def test_the_defaults_ask_nothing_and_announce_as_a_notification() -> None:
    settings = config_from_dict(voice(), env={}).platforms.homeassistant.voice
    assert (settings.satellite, settings.owner_chat, settings.approval) == (None, None, [])
    chosen = config_from_dict(
        voice(satellite="assist_satellite.kitchen", approval=["HassUnlock", "Hass*Open"]), env={}
    ).platforms.homeassistant.voice
    assert chosen.satellite == "assist_satellite.kitchen"
    assert chosen.approval == ["HassUnlock", "Hass*Open"]
    assert (
        config_from_dict(
            voice(owner_chat="main:house@home"), env={}
        ).platforms.homeassistant.voice.owner_chat
        == "main:house@home"
    )

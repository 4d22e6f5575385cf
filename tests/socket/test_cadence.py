"""The iris socket's default cadence: an update per 48 characters (doc: iris-protocol.md,
"Cadence"), its own default rather than the chat platforms' ``streaming.buffer_threshold``."""

from __future__ import annotations

from typing import Any

import pytest

from iris.runtime import Runtime
from iris.surfaces.socket.room import encoder_settings
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, hold
from tests.socket.conftest import StartServer

STREAMING = {"enabled": True}
# Only the character threshold decides when an update goes out: the interval never comes.
NO_TICK = {"platforms": {"iris": {"edit_interval": 1000}}}


async def test_an_update_waits_for_48_characters_when_nothing_is_set(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    first, then, one_more = "a", "b" * 47, "c"
    upstream.script(hold(first, then, one_more))
    server = await iris_server(streaming=STREAMING, display=NO_TICK)
    device = await server.connect()
    await device.send({"type": "message.send", "text": "go"})
    grown: list[str] = []
    while not grown or len(grown[-1]) < 48:
        grown.append((await device.until("message.update"))[-1]["text"])
    # 47 characters waiting were not enough (the old default, 24, sent them); the 48th was.
    assert grown[-1] == first + then + one_more
    assert set(grown) <= {first, first + then + one_more}
    upstream.release()
    frames = await device.turn()
    assert frames[-2]["type"] == "message.stop"
    assert frames[-2]["final_text"] == first + then + one_more


@pytest.mark.parametrize(
    ("display", "threshold"),
    [
        ({}, 48),
        ({"platforms": {"iris": {"buffer_threshold": 24}}}, 24),
        ({"platforms": {"iris": {"buffer_threshold": 200}}}, 200),
    ],
)
def test_iris_threshold_is_48_unless_iris_sets_one(
    make_config: MakeConfig, display: dict[str, Any], threshold: int
) -> None:
    config = make_config(None, display=display)
    settings = encoder_settings(Runtime.create(config))
    assert settings.buffer_threshold == threshold
    assert settings.edit_interval == 0.8


def test_the_chat_platforms_keep_the_global_threshold(make_config: MakeConfig) -> None:
    config = make_config(None)
    assert config.streaming.buffer_threshold == 24
    for platform in ("telegram", "discord", "slack"):
        assert config.display_for(platform).buffer_threshold == 24
    # The global key paces the chat platforms only; iris keeps its own default.
    tuned = make_config(None, streaming={"buffer_threshold": 100})
    assert tuned.display_for("telegram").buffer_threshold == 100
    assert encoder_settings(Runtime.create(tuned)).buffer_threshold == 48

"""One poller per bot token across ``iris serve`` processes on one Redis: the first polls, the
other stands by; when the poller is killed (kill -9) the other takes over within the lease and
answers the next message. Against the Telegram Bot API fake over real sockets."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from iris.runtime import Runtime
from iris.state.redis_store import RedisStore
from iris.surfaces.chat.platforms.base import OnMessage
from iris.surfaces.chat.poller import bot_token, poller_key
from iris.surfaces.chat.runner import ChatSurface
from tests.chat.harness import platform_config
from tests.conftest import MakeConfig
from tests.fakes.recording_platform import RecordingPlatform
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, text
from tests.scale.conftest import RedisServer
from tests.scale.pollers import CHAT, USER, bot_servers, said

pytestmark = pytest.mark.timeout(90)


async def test_one_bot_is_polled_by_one_process_and_a_standby_takes_over_when_it_dies(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    async with (
        FakeBotApi() as api,
        bot_servers(tmp_path, upstream, redis_server, api, lease=1) as start,
    ):
        a = await start("a")
        await api.wait_until(lambda: "a" in api.polled_by)
        b = await start("b")
        assert any("telegram: standing by" in line for line in b.drain()), b.log

        upstream.script(text("hello from the poller"))
        api.user_says(chat_id=CHAT, user_id=USER, text="hi")
        await api.wait_until(lambda: said(api, "hello from the poller"))
        assert "b" not in api.polled_by  # one getUpdates poller for the bot: a's

        a.process.kill()  # kill -9: its lease runs out, nobody releases it
        await api.wait_until(lambda: "b" in api.polled_by, within=15)
        upstream.script(text("hello from the survivor"))
        api.user_says(chat_id=CHAT, user_id=USER, text="still there?")
        await api.wait_until(lambda: said(api, "hello from the survivor"), within=15)
        assert not any("Traceback" in line for line in b.drain()), b.log


async def test_a_poller_that_stops_hands_the_bot_over_without_waiting_for_its_lease(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    # A long lease: a takeover within it proves the stopping poller gave its lease up.
    async with (
        FakeBotApi() as api,
        bot_servers(tmp_path, upstream, redis_server, api, lease=60) as start,
    ):
        a = await start("a")
        await start("b")
        a.process.terminate()  # SIGTERM: a graceful stop
        assert await asyncio.to_thread(a.process.wait, 30) == 0
        await api.wait_until(lambda: "b" in api.polled_by, within=15)


async def test_a_poller_that_loses_its_lease_stops_receiving_and_takes_it_again_later(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    """Redis away for longer than the lease: another process could hold the bot now, so this
    one stops polling; when Redis returns it takes the lease again and answers."""
    async with (
        FakeBotApi() as api,
        bot_servers(tmp_path, upstream, redis_server, api, lease=1) as start,
    ):
        server = await start("a")
        await api.wait_until(lambda: "a" in api.polled_by)
        redis_server.stop()
        await asyncio.to_thread(server.wait_for, "telegram: poller lease lost")
        polls = len(api.polled_by)
        redis_server.start()
        await api.wait_until(lambda: len(api.polled_by) > polls, within=15)
        upstream.script(text("back again"))
        api.user_says(chat_id=CHAT, user_id=USER, text="hi")
        await api.wait_until(lambda: said(api, "back again"), within=15)
        assert not any("Traceback" in line for line in server.drain()), server.log


@dataclass
class Receiver(RecordingPlatform):
    connects: asyncio.Event = field(default_factory=asyncio.Event)

    async def connect(self, on_message: OnMessage) -> None:
        await super().connect(on_message)
        self.connects.set()


@pytest.mark.parametrize(
    ("platform", "settings"),
    [("discord", {"token": "discord-token"}), ("slack", {"bot_token": "xoxb-1", "app_token": "a"})],
)
async def test_discord_and_slack_bots_get_one_receiver_too(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    redis_server: RedisServer,
    tmp_path: Path,
    platform: str,
    settings: dict[str, Any],
) -> None:
    """Two processes' chat surfaces (each its own Redis clients and process id) for one
    Discord gateway / Slack socket: one receives; when it stops, the other does."""
    surfaces: list[tuple[ChatSurface, Runtime, Receiver]] = []
    try:
        for name in ("a", "b"):
            store = {"url": redis_server.url, "path": str(tmp_path / f"{name}.db"), "lease": 1}
            config = platform_config(make_config, upstream, platform, settings, store=store)
            runtime = Runtime.create(config)
            receiver = Receiver(name=platform)
            surface = ChatSurface(runtime, platforms=[receiver])
            await surface.start()
            surfaces.append((surface, runtime, receiver))
        (first, _, a), (_, _, b) = surfaces
        assert (a.connected, b.connected) == (True, False)

        await first.stop()  # gives the lease up
        await asyncio.wait_for(b.connects.wait(), 10)
        assert not a.connected
    finally:
        for surface, runtime, _ in surfaces:
            await surface.stop()
            await runtime.agent.aclose()
            runtime.store.close()
            if runtime.shared is not None:
                await runtime.shared.aclose()


def test_the_lease_names_the_bot_by_a_digest_of_its_token(make_config: MakeConfig) -> None:
    config = make_config(
        platforms={"slack": {"bot_token": "xoxb-secret", "app_token": "xapp-other"}},
        store={"prefix": "team"},
    )
    store = RedisStore("redis://127.0.0.1:1/0", prefix=config.store.prefix)
    token = bot_token(config, "slack")
    assert token == "xoxb-secret"  # the bot token names the bot; the app token is the app's
    digest = hashlib.sha256(b"xoxb-secret").hexdigest()[:16]
    assert poller_key(store, "slack", token) == f"team:poller:slack:{digest}"
    store.close()

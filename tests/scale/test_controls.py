"""A chat's controls hold across ``iris serve`` processes on one Redis: ``/model`` and
``/reasoning`` sent through one process set what a turn on another uses, and ``/status``
anywhere shows the last reply's usage. On the iris socket (two processes, no sticky sessions)
and on a chat platform (the bot's poller moving to another process)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iris.config import Config
from iris.errors import StoreUnavailable
from iris.runtime import Runtime
from iris.state.controls import Controls, RedisControls
from tests.fakes.served import Served, serve
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, reasoning, text
from tests.scale.conftest import RedisServer, serve_on_redis, socket_url
from tests.scale.devices import STREAMING, device
from tests.scale.pollers import CHAT, USER, said, telegram
from tests.socket.conftest import TOKEN, Device

pytestmark = pytest.mark.timeout(90)


def models(upstream: FakeUpstream) -> dict[str, Any]:
    """The config's main model and one fallback, both on the fake upstream."""
    backup = {"name": "backup-model", "base_url": upstream.base_url, "api_key": "sk-test"}
    return {"fallback": [backup]}


@pytest.fixture
def two(
    tmp_path: Path, redis_server: RedisServer, upstream: FakeUpstream
) -> Iterator[tuple[str, str]]:
    """Two ``iris serve`` processes sharing ``redis_server``; their iris socket URLs."""
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        redis_server,
        platforms={"iris": {"enabled": True, "tokens": [TOKEN]}},
        streaming=STREAMING,
        model=models(upstream),
    ) as running:
        yield socket_url(running[0][1]), socket_url(running[1][1])


async def command(dev: Device, text_: str) -> str:
    await dev.send({"type": "message.send", "text": text_})
    return str((await dev.until("command"))[-1]["text"])


async def test_model_and_reasoning_set_on_one_process_hold_on_the_other(
    two: tuple[str, str], upstream: FakeUpstream
) -> None:
    a_url, b_url = two
    upstream.script(text("hi from backup"), reasoning(["thinking hard"], ["shown"]), text("back"))
    on_a, on_b = await device(a_url), await device(b_url)

    assert await command(on_b, "/model backup-model") == (
        "model: backup-model (from the next message)"
    )
    await on_a.send({"type": "message.send", "text": "hi"})
    await on_a.turn()
    assert upstream.requests[-1].body["model"] == "backup-model"
    # B shows what A's turn used and how much (the fake answers 10 in, 5 out).
    status = await command(on_b, "/status")
    assert "model: backup-model" in status and "last reply: 10 in, 5 out" in status

    assert await command(on_a, "/reasoning on") == "reasoning shown"
    assert await command(on_b, "/reasoning") == "reasoning shown"
    await on_b.send({"type": "message.send", "text": "think"})
    frames = await on_b.turn()
    assert any("thinking hard" in str(f.get("reasoning", "")) for f in frames)

    # Back to the main model through A: B's next turn uses it.
    assert await command(on_a, "/model fake-model") == "model: fake-model (from the next message)"
    await on_b.send({"type": "message.send", "text": "again"})
    await on_b.turn()
    assert upstream.requests[-1].body["model"] == "fake-model"
    for dev in (on_a, on_b):
        await dev.close()


async def test_a_bots_chat_keeps_its_model_when_another_process_takes_the_poller_over(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    servers: list[Served] = []

    async def start(name: str) -> Served:
        store = {"url": redis_server.url, "path": str(tmp_path / f"{name}.db"), "lease": 60}
        server, _ = await asyncio.to_thread(
            serve,
            tmp_path,
            upstream.base_url,
            name=f"{name}.yaml",
            store=store,
            platforms=telegram(api, name),
            model=models(upstream),
        )
        servers.append(server)
        return server

    async with FakeBotApi() as api:
        try:
            a = await start("a")
            await api.wait_until(lambda: "a" in api.polled_by)
            await start("b")
            upstream.script(text("first answer"), text("from the backup"))
            api.user_says(chat_id=CHAT, user_id=USER, text="hi")
            await api.wait_until(lambda: said(api, "first answer"))
            api.user_says(chat_id=CHAT, user_id=USER, text="/model backup-model")
            await api.wait_until(lambda: said(api, "model: backup-model (from the next message)"))

            a.process.terminate()  # the poller hands the bot to b
            assert await asyncio.to_thread(a.process.wait, 30) == 0
            await api.wait_until(lambda: "b" in api.polled_by, within=15)
            api.user_says(chat_id=CHAT, user_id=USER, text="/status")
            await api.wait_until(lambda: said(api, "last reply: 10 in, 5 out"), within=15)
            assert said(api, "model: backup-model\n")
            api.user_says(chat_id=CHAT, user_id=USER, text="still there?")
            await api.wait_until(lambda: said(api, "from the backup"), within=15)
            assert upstream.requests[-1].body["model"] == "backup-model"
        finally:
            for server in servers:
                server.stop()


async def test_a_save_writes_only_the_fields_it_names(redis_server: RedisServer) -> None:
    """A turn's usage, kept at its end, leaves a ``/model`` taken meanwhile (elsewhere) alone;
    a model set back to the config's is no longer kept; a lost Redis is ``StoreUnavailable``."""
    config = Config.model_validate(
        {"store": {"url": redis_server.url}, "model": {"name": "m", "base_url": "http://x"}}
    )
    runtime = Runtime.create(config)
    assert runtime.shared is not None
    kept = runtime.controls
    assert isinstance(kept, RedisControls)
    try:
        assert await kept.load("s") == Controls()
        turn = await kept.load("s")  # read when a turn starts
        await kept.save("s", Controls(model="other", show_reasoning=False), "model")
        turn.last_usage = {"input_tokens": 3, "output_tokens": 2}
        await kept.save("s", turn, "last_usage")
        assert await kept.load("s") == Controls(
            model="other", last_usage={"input_tokens": 3, "output_tokens": 2}
        )
        await kept.save("s", Controls(show_reasoning=False), "model", "show_reasoning")
        assert await kept.load("s") == Controls(
            show_reasoning=False, last_usage={"input_tokens": 3, "output_tokens": 2}
        )
        assert await kept.load("t") == Controls()  # another chat's are its own
        redis_server.stop()
        with pytest.raises(StoreUnavailable):
            await kept.load("s")
    finally:
        await runtime.shared.aclose()
        runtime.store.close()

"""Finding 2 of the second pass: after Redis lost its data, the apps silently dropped replies
(seqs restart at 1; the apps drop every seq they have seen and ``sync`` reset neither): the
streaming bubble stayed "streaming" for ever, the next reply invisible until a reload. Now
``ready`` and ``sync`` carry the chat log's epoch; the process that notices the restart closes
the cut turn (``message.stop`` with what was shown, ``error`` ``store_lost``, typing off) and
resyncs its devices to the new epoch. Replayed with a real redis-server restarted empty."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect

from iris.app.core.view import ChatView
from tests.fakes.upstream import FakeUpstream, gated, text
from tests.scale.conftest import RedisServer, redis_server, serve_on_redis, socket_url  # noqa: F401
from tests.socket.conftest import TOKEN, WAIT, Device

pytestmark = pytest.mark.timeout(120)


def wipe(redis: RedisServer) -> None:
    """Redis killed and started again with none of its data (an RDB-less restart)."""
    redis.kill()
    for entry in redis.directory.iterdir():
        if entry.name != "redis.log":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    redis.start()


async def test_a_reply_cut_by_a_store_that_lost_its_data_is_closed_and_the_next_one_shows(
    tmp_path: Path,
    upstream: FakeUpstream,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    upstream.script(gated("Hel", "lo", " there", after=1), text("Again"))
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        redis_server,
        ("a",),
        platforms={"iris": {"enabled": True, "tokens": [TOKEN]}},
        streaming={"enabled": True, "min_tokens": 1},
        display={"platforms": {"iris": {"buffer_threshold": 1}}},
    ) as running:
        ws = await connect(socket_url(running[0][1]), open_timeout=WAIT)
        dev = Device(ws)
        app = ChatView(time.monotonic, streaming=False)
        await dev.send({"type": "hello", "token": TOKEN})
        ready = await dev.recv()
        assert ready["type"] == "ready" and isinstance(ready["epoch"], str)
        app.apply(ready)
        await dev.send({"type": "message.send", "text": "hi"})
        seen: list[dict[str, Any]] = await dev.until("message.update", text="Hel")
        for frame in seen:
            app.apply(frame)
        await asyncio.to_thread(wipe, redis_server)
        upstream.release()
        after = await dev.until("typing", within=60, on=False)
        for frame in after:
            app.apply(frame)
        kinds = [f["type"] for f in after]
        sync = next(f for f in after if f["type"] == "sync")
        assert sync["epoch"] != ready["epoch"]
        assert "message.stop" in kinds
        assert any(f["type"] == "error" and f["code"] == "store_lost" for f in after)
        assert not any(b.streaming for b in app.bubbles)  # nothing streams for ever
        # The next reply shows, though its seqs are ones the app saw before the loss.
        await dev.send({"type": "message.send", "text": "again?"})
        for frame in await dev.until("typing", on=False):
            app.apply(frame)
        assert any(b.text == "Again" for b in app.bubbles), [b.text for b in app.bubbles]
        await ws.close()

"""The Matrix sync loop's failures, which a healthy Synapse does not produce on cue: a
homeserver that answers 502, cannot be reached, or limits ``/sync`` itself.

``MatrixPlatform`` runs on ``httpx.MockTransport`` here; its waits between syncs go through
its ``pause`` seam, recorded instead of slept.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from iris.config import MatrixConfig
from iris.surfaces.chat.platforms.base import IncomingMessage
from iris.surfaces.chat.platforms.matrix import MatrixPlatform
from iris.surfaces.chat.platforms.matrix_api import MatrixApi

pytestmark = pytest.mark.timeout(30)

BOT, ALICE = "@iris:example.org", "@alice:example.org"
ROOM = "!room:example.org"


def _message(sender: str, body: str, event_id: str) -> dict[str, Any]:
    content = {"msgtype": "m.text", "body": body}
    return {"type": "m.room.message", "sender": sender, "event_id": event_id, "content": content}


def _sync(batch: str, *timeline: dict[str, Any]) -> httpx.Response:
    rooms = {"join": {ROOM: {"timeline": {"events": list(timeline)}}}} if timeline else {}
    return httpx.Response(200, json={"next_batch": batch, "rooms": rooms})


class Homeserver:
    """Answers ``/sync`` from a script, then holds the last one open."""

    def __init__(self) -> None:
        self.script: list[httpx.Response | Exception] = [
            httpx.Response(502, json={"errcode": "M_UNKNOWN", "error": "bad gateway"}),
            httpx.ConnectError("refused"),
            httpx.Response(502, text="<html>bad gateway</html>"),
            _sync("s1", _message(ALICE, "said before the bot started", "$0")),
            httpx.Response(429, json={"errcode": "M_LIMIT_EXCEEDED", "retry_after_ms": 1500}),
            _sync("s2", _message(BOT, "the bot's own", "$1"), _message(ALICE, "hello", "$2")),
        ]
        self.since: list[str | None] = []
        self.held = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/account/whoami"):
            return httpx.Response(200, json={"user_id": BOT})
        if path.endswith("/joined_members"):
            return httpx.Response(200, json={"joined": {BOT: {}, ALICE: {}}})
        assert path.endswith("/sync"), path
        self.since.append(request.url.params.get("since"))
        if not self.script:
            self.held.set()
            await asyncio.Event().wait()  # a long poll with nothing new
        answer = self.script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_sync_backs_off_honours_its_rate_limit_keeps_its_token_and_skips_its_own(
    tmp_path: Path,
) -> None:
    homeserver = Homeserver()
    settings = MatrixConfig(enabled=True, user_id=BOT, access_token="syt_x", allowed_users=[ALICE])
    platform = MatrixPlatform(settings, tmp_path)
    await platform.api.aclose()
    platform.api = MatrixApi(
        settings.homeserver, "syt_x", transport=httpx.MockTransport(homeserver)
    )
    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)

    platform.pause = pause
    received: list[IncomingMessage] = []

    async def on_message(message: IncomingMessage) -> None:
        received.append(message)

    await platform.connect(on_message)
    try:
        await asyncio.wait_for(homeserver.held.wait(), 10)
    finally:
        await platform.disconnect()
    assert pauses == [1.0, 2.0, 4.0, 1.5], "doubling after failures; the homeserver's own wait"
    assert homeserver.since == [None, None, None, None, "s1", "s1", "s2"]
    assert [(m.user_id, m.text, m.is_group) for m in received] == [(ALICE, "hello", False)]
    assert platform.api.limited == 1
    again = MatrixPlatform(settings, tmp_path)  # a restart goes on from the kept token
    assert again.kept.get("since") == "s2"
    await again.api.aclose()

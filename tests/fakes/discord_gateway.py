"""A fake Discord gateway on 127.0.0.1: the WebSocket discord.py receives events through.

It says HELLO, answers heartbeats, answers IDENTIFY with READY and one guild (a text channel
and two threads in it), then sends what a test dispatches. ``message_create`` builds a
MESSAGE_CREATE as Discord sends it: ``mentions`` holds the users its ``<@id>`` name, and a reply
carries ``message_reference`` and the ``referenced_message`` it answers. A wrong token is closed with 4004 and
a refused Message Content intent with 4014, as Discord does::

    async with DiscordGateway(token=api.token) as gateway:
        point_discord_py_at(monkeypatch, api, gateway)
        await platform.connect(on_message)
        await gateway.dispatch("MESSAGE_CREATE", message_payload(...))
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from typing import Any

import pytest
import yarl
from aiohttp import WSMsgType, web
from discord.gateway import DiscordWebSocket
from discord.http import Route

from tests.fakes.discord_api import BOT_ID, OWNER_ID, DiscordAPI, message_payload, user_payload

GUILD_ID = "1200000000000000001"
CHANNEL_ID = "1100000000000000001"
THREAD_ID = "1100000000000000002"
THREAD_ID_2 = "1100000000000000003"
MESSAGE_CONTENT_INTENT = 1 << 15


def point_discord_py_at(
    monkeypatch: pytest.MonkeyPatch, api: DiscordAPI, gateway: DiscordGateway
) -> None:
    """Aim discord.py's own login and gateway at the fakes, for one test.

    Iris's REST calls take ``base_url``; discord.py logs in against its built-in REST root and
    gateway URL, class constants it has no option for."""
    monkeypatch.setattr(Route, "BASE", api.base_url)
    monkeypatch.setattr(DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(gateway.url))


class DiscordGateway:
    def __init__(self, *, token: str) -> None:
        self.token = token
        # Whether the bot may ask for the Message Content intent (a switch in the portal).
        self.message_content_allowed = True
        self.identify: dict[str, Any] = {}
        self.url = ""
        self._socket: web.WebSocketResponse | None = None
        self._sequence = itertools.count(1)
        self._identified_session = asyncio.Condition()
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> DiscordGateway:
        app = web.Application()
        app.router.add_get("/", self._connection)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"ws://127.0.0.1:{self._runner.addresses[0][1]}/"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._socket is not None:
            await self._socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send a gateway event (``MESSAGE_CREATE``, …) once a session is identified."""
        async with self._identified_session:
            await self._identified_session.wait_for(lambda: self._socket is not None)
        assert self._socket is not None
        payload = {"op": 0, "t": event, "s": next(self._sequence), "d": data}
        await self._socket.send_str(json.dumps(payload))

    # -- the protocol -----------------------------------------------------------------------

    async def _connection(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        await socket.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41250}}))
        async for frame in socket:
            if frame.type is not WSMsgType.TEXT:
                continue
            message = json.loads(frame.data)
            if message["op"] == 1:
                await socket.send_str(json.dumps({"op": 11, "d": None}))
            elif message["op"] == 2:
                await self._identified(socket, message["d"])
        return socket

    async def _identified(self, socket: web.WebSocketResponse, identify: dict[str, Any]) -> None:
        self.identify = identify
        if identify.get("token") != self.token:
            await socket.close(code=4004, message=b"Authentication failed.")
            return
        if identify.get("intents", 0) & MESSAGE_CONTENT_INTENT and not self.message_content_allowed:
            await socket.close(code=4014, message=b"Disallowed intent(s).")
            return
        ready = {
            "v": 10,
            "user": user_payload(BOT_ID, "iris-bot", bot=True),
            "guilds": [{"id": GUILD_ID, "unavailable": True}],
            "session_id": "fake-session",
            "resume_gateway_url": self.url,
            "application": {"id": BOT_ID, "flags": 0},
        }
        for event, data in (("READY", ready), ("GUILD_CREATE", _guild())):
            payload = {"op": 0, "t": event, "s": next(self._sequence), "d": data}
            await socket.send_str(json.dumps(payload))
        async with self._identified_session:
            self._socket = socket
            self._identified_session.notify_all()


def _guild() -> dict[str, Any]:
    channel = {
        "id": CHANNEL_ID,
        "type": 0,
        "guild_id": GUILD_ID,
        "name": "general",
        "position": 0,
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
        "rate_limit_per_user": 0,
    }
    threads = [
        {
            "id": thread_id,
            "type": 11,
            "guild_id": GUILD_ID,
            "parent_id": CHANNEL_ID,
            "owner_id": OWNER_ID,
            "name": name,
            "message_count": 1,
            "member_count": 2,
            "rate_limit_per_user": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": "2026-11-29T21:00:00.000000+00:00",
                "locked": False,
            },
        }
        for thread_id, name in ((THREAD_ID, "a question"), (THREAD_ID_2, "another one"))
    ]
    return {
        "id": GUILD_ID,
        "name": "Iris test",
        "unavailable": False,
        "member_count": 2,
        "channels": [channel],
        "threads": threads,
    }


def press(
    api: DiscordAPI,
    message_id: str,
    custom_id: str,
    user_id: str,
    *,
    name: str = "ada",
    stale: bool = False,
) -> dict[str, Any]:
    """The INTERACTION_CREATE of user ``user_id`` pressing a button in the guild's channel."""
    user = user_payload(user_id, name, global_name=name.title())
    return api.interaction(message_id, custom_id, user, guild_id=GUILD_ID, stale=stale)


def message_create(
    author_id: str,
    content: str,
    *,
    channel: str = CHANNEL_ID,
    bot: bool = False,
    dm: bool = False,
    message_id: str = "1300000000000000001",
    reply_to_bot: str | None = None,
) -> dict[str, Any]:
    """A MESSAGE_CREATE from user ``ada`` (display name "Ada") in the guild, or a DM;
    ``reply_to_bot``: the id of the bot's message it replies to."""
    author = user_payload(author_id, "ada", bot=bot, global_name="Ada")
    guild_id = None if dm else GUILD_ID
    payload = message_payload(message_id, channel, content, author, guild_id=guild_id)
    payload["mentions"] = [
        user_payload(BOT_ID, "iris-bot", bot=True) if uid == BOT_ID else user_payload(uid, "u")
        for uid in dict.fromkeys(re.findall(r"<@!?(\d+)>", content))
    ]
    if reply_to_bot is not None:
        payload["type"] = 19  # REPLY
        payload["message_reference"] = {
            "type": 0,
            "message_id": reply_to_bot,
            "channel_id": channel,
            "guild_id": guild_id,
        }
        bot_user = user_payload(BOT_ID, "iris-bot", bot=True)
        payload["referenced_message"] = message_payload(
            reply_to_bot, channel, "an earlier answer", bot_user, guild_id=guild_id
        )
    return payload

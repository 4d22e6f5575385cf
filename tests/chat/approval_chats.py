"""The chat platforms with approval prompts, against their fakes: a ``chat`` fixture over
Telegram, Discord and Slack (``Chat``: its messages, a press, a message sent), and the helpers
that wait on a prompt and count the runs of its command (``tests/chat/test_approvals_e2e.py``
and the adversarial approval tests use them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from iris.surfaces.chat.runner import ChatSurface
from tests.chat.harness import STREAMING, running
from tests.conftest import MakeConfig, shared_workspace
from tests.fakes.discord_api import DiscordAPI
from tests.fakes.discord_gateway import (
    DiscordGateway,
    message_create,
    point_discord_py_at,
    press,
)
from tests.fakes.slack_api import CHANNEL, SlackAPI, message_event
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, Received, text, tool_call

# Per platform: two allowed users and a stranger (ids as the platform spells them).
USERS = {
    "telegram": ("7", "8", "666"),
    "discord": ("5000000000000001", "5000000000000002", "5000000000000666"),
    "slack": ("U0000042", "U0000043", "U0000666"),
}
TELEGRAM_CHAT = 42
COMMAND = "echo ran >> approved; echo done-running"
LABEL = {"once": "Allow once", "chat": "Allow in this chat", "deny": "Deny"}


@dataclass(frozen=True)
class Shown:
    """A bot message as the person sees it: its text and the buttons on it (label -> data)."""

    message_id: str
    text: str
    buttons: dict[str, str]


class Chat(Protocol):
    """One platform's chat, as a person uses it."""

    name: str
    surface: ChatSurface

    async def say(self, user: str, text: str) -> None: ...

    def messages(self) -> list[Shown]: ...

    async def press(self, message_id: str, data: str, user: str, *, stale: bool = False) -> None:
        """``user`` presses the button ``data`` (``stale``: sent before the button went)."""
        ...

    def refusals(self) -> list[str]:
        """The answers to presses that changed nothing, as their presser saw them."""
        ...

    def unanswered(self) -> int:
        """Presses the platform still waits for an answer to (a spinner on the button)."""
        ...

    async def changed(self, ready: Callable[[], bool]) -> None: ...


class TelegramChat:
    name = "telegram"

    def __init__(self, api: FakeBotApi, surface: ChatSurface) -> None:
        self.api, self.surface = api, surface

    async def say(self, user: str, text: str) -> None:
        self.api.user_says(TELEGRAM_CHAT, int(user), text)

    def messages(self) -> list[Shown]:
        shown: list[Shown] = []
        for message_id, body in self.api.messages.get(TELEGRAM_CHAT, {}).items():
            rows = self.api.keyboard(TELEGRAM_CHAT, message_id)
            buttons = {b["text"]: b["callback_data"] for row in rows for b in row}
            shown.append(Shown(str(message_id), body, buttons))
        return shown

    async def press(self, message_id: str, data: str, user: str, *, stale: bool = False) -> None:
        self.api.press(TELEGRAM_CHAT, int(message_id), int(user), data, stale=stale)

    def refusals(self) -> list[str]:
        return [a["text"] for a in self.api.answers.values() if a is not None and a["show_alert"]]

    def unanswered(self) -> int:
        return sum(a is None for a in self.api.answers.values())  # no answerCallbackQuery

    async def changed(self, ready: Callable[[], bool]) -> None:
        await self.api.wait_until(ready, within=20)


class DiscordChat:
    name = "discord"

    def __init__(self, api: DiscordAPI, gateway: DiscordGateway, surface: ChatSurface) -> None:
        self.api, self.gateway, self.surface = api, gateway, surface

    async def say(self, user: str, text: str) -> None:
        await self.gateway.dispatch("MESSAGE_CREATE", message_create(user, text))

    def messages(self) -> list[Shown]:
        return [
            Shown(m.id, _unescaped(m.content), {b["label"]: b["custom_id"] for b in m.buttons()})
            for m in self.api.messages.values()
        ]

    async def press(self, message_id: str, data: str, user: str, *, stale: bool = False) -> None:
        payload = press(self.api, message_id, data, user, stale=stale)
        await self.gateway.dispatch("INTERACTION_CREATE", payload)

    def refusals(self) -> list[str]:
        return [
            r["data"]["content"]
            for r in self.api.responses.values()
            if r["type"] == 4 and r["data"].get("flags") == 64
        ]

    def unanswered(self) -> int:
        return len(set(self.api.interactions) - set(self.api.responses))  # no callback

    async def changed(self, ready: Callable[[], bool]) -> None:
        async with asyncio.timeout(20):
            await self.api.wait_until(ready)


class SlackChat:
    name = "slack"

    def __init__(self, api: SlackAPI, surface: ChatSurface) -> None:
        self.api, self.surface = api, surface
        self._said = 0
        self._pressed: list[str] = []  # envelope ids

    async def say(self, user: str, text: str) -> None:
        self._said += 1  # every message its own ts: Slack's redelivery check goes by it
        ts = f"1764453100.{self._said:06d}"
        await self.api.push_event(message_event(user, text, ts=ts, event_ts=ts))

    def messages(self) -> list[Shown]:
        shown: list[Shown] = []
        for message in self.api.messages.values():
            sections = [b for b in message.blocks if b["type"] == "section"]
            text = sections[0]["text"]["text"] if sections else message.text
            buttons = {b["text"]["text"]: b["value"] for b in message.buttons()}
            shown.append(Shown(message.ts, text, buttons))
        return shown

    async def press(self, message_id: str, data: str, user: str, *, stale: bool = False) -> None:
        self._pressed.append(await self.api.press(CHANNEL, message_id, user, data, stale=stale))

    def refusals(self) -> list[str]:
        return [str(e["text"]) for e in self.api.ephemerals]

    def unanswered(self) -> int:
        acked = {a.get("envelope_id") for a in self.api.acks}
        return sum(envelope not in acked for envelope in self._pressed)  # no ack

    async def changed(self, ready: Callable[[], bool]) -> None:
        async with asyncio.timeout(20):
            await self.api.wait_until(ready)


def _unescaped(content: str) -> str:
    """Discord's rendering of the escaped markdown the adapter sends: the text as written."""
    out, escaped = [], False
    for char in content:
        if char == "\\" and not escaped:
            escaped = True
            continue
        out.append(char)
        escaped = False
    return "".join(out)


@pytest.fixture
def approval_timeout() -> float:
    """``tools.approval.timeout``: long, unless a test parametrizes it shorter."""
    return 60.0


@pytest.fixture(params=["telegram", "discord", "slack"])
async def chat(
    request: pytest.FixtureRequest,
    make_config: MakeConfig,
    upstream: FakeUpstream,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    approval_timeout: float,
) -> AsyncIterator[Chat]:
    name: str = request.param
    # A module whose chats need other config sections (``tools``, ``mcp_servers``) defines a
    # ``chat_keys`` fixture giving them; they replace the fixture's own.
    try:
        chat_keys: dict[str, Any] = request.getfixturevalue("chat_keys")
    except pytest.FixtureLookupError:
        chat_keys = {}
    owner, friend, _ = USERS[name]
    approval = {"timeout": approval_timeout}
    async with contextlib.AsyncExitStack() as stack:
        settings: dict[str, Any]
        if name == "telegram":
            tg = await stack.enter_async_context(FakeBotApi())
            settings = {"token": tg.token, "base_url": tg.base_url, "poll_timeout": 1}
            # The fake limits the bot, not each chat: these tests need not wait a second a call
            # (nor three in a group, whose default is twenty a minute).
            settings["budgets"] = {
                "private_chat": {"calls": 5, "per": 1.0},
                "group_chat": {"calls": 20, "per": 2.0},
            }
        elif name == "discord":
            dc = await stack.enter_async_context(DiscordAPI())
            gateway = await stack.enter_async_context(DiscordGateway(token=dc.token))
            point_discord_py_at(monkeypatch, dc, gateway)
            settings = {"token": dc.token, "base_url": dc.base_url}
        else:
            sl = await stack.enter_async_context(SlackAPI())
            settings = {"bot_token": sl.bot_token, "app_token": sl.app_token}
            settings["base_url"] = sl.base_url
        config = make_config(
            upstream.base_url,
            streaming=STREAMING,
            platforms={
                "api_server": {"enabled": False},
                "iris": {"enabled": False},
                name: {
                    "enabled": True,
                    "allowed_users": [owner, friend],
                    "debounce": 0,
                    "groups": {"respond": "all"},  # the channel's messages need no mention
                    **settings,
                },
            },
            display={"platforms": {name: {"transport": "edit"}}},
            **{
                "tools": {
                    "enabled": ["terminal"],
                    "terminal": shared_workspace(tmp_path),
                    "approval": {"mode": "ask", **approval},
                },
                **chat_keys,
            },
        )
        surface = await stack.enter_async_context(running(config))
        if name == "telegram":
            yield TelegramChat(tg, surface)
        elif name == "discord":
            yield DiscordChat(dc, gateway, surface)
        else:
            yield SlackChat(sl, surface)


def script_tool_turn(upstream: FakeUpstream, command: str = COMMAND) -> None:
    upstream.script(
        tool_call("terminal", [json.dumps({"command": command})]),
        text("Finished."),
    )


async def the_prompt(chat: Chat) -> Shown:
    """Wait for the message with the approval buttons; it."""
    await chat.changed(lambda: any(m.buttons for m in chat.messages()))
    return next(m for m in chat.messages() if m.buttons)


def shown(chat: Chat, message_id: str) -> Shown:
    return next(m for m in chat.messages() if m.message_id == message_id)


async def closed(chat: Chat, prompt: Shown) -> Shown:
    """Wait until the prompt lost its buttons; it then."""
    await chat.changed(lambda: not shown(chat, prompt.message_id).buttons)
    return shown(chat, prompt.message_id)


def tool_result(request: Received) -> str:
    """The tool message the model was sent back (the second request of the turn)."""
    messages: list[dict[str, Any]] = request.body["messages"]
    return str(next(m for m in messages if m["role"] == "tool")["content"])


def ran(tmp_path: Path) -> int:
    """How many times the command ran (one line per run)."""
    marker = tmp_path / "ws" / "approved"
    return len(marker.read_text().splitlines()) if marker.exists() else 0

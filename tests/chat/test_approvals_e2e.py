"""Approvals on the chat platforms, end to end: the real adapters against the fakes' wire.

The agent calls ``terminal`` (asked by default, ``tools.approval``); the chat shows a prompt
with Allow once / Allow in this chat / Deny (a Telegram inline keyboard, Discord components,
Slack Block Kit buttons) carrying the whole command; a press comes back the way each platform
delivers it (a ``callback_query`` over getUpdates, INTERACTION_CREATE on the gateway, a
Socket Mode ``block_actions`` envelope) and is answered the platform's way
(``answerCallbackQuery``, the interaction callback, an ephemeral message).

What a person would notice: the command runs exactly once after an allow and never after a
deny, a timeout or an interrupt; the prompt is edited to say what was decided and by whom, and
its buttons go; a stranger's press changes nothing; of two presses at once one decides.
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

from iris.formats.visible import CUT
from iris.surfaces.chat.prompts import NOT_ALLOWED, NOT_OPEN
from iris.surfaces.chat.runner import ChatSurface
from tests.chat.harness import STREAMING, running
from tests.conftest import MakeConfig
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

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]

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
    owner, friend, _ = USERS[name]
    approval = {"timeout": approval_timeout}
    async with contextlib.AsyncExitStack() as stack:
        settings: dict[str, Any]
        if name == "telegram":
            tg = await stack.enter_async_context(FakeBotApi())
            settings = {"token": tg.token, "base_url": tg.base_url, "poll_timeout": 1}
            # The fake limits the bot, not each chat: these tests need not wait a second a call.
            settings["budgets"] = {"private_chat": {"calls": 5, "per": 1.0}}
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
            tools={
                "enabled": ["terminal"],
                "terminal": {"cwd": str(tmp_path)},
                "approval": {"mode": "ask", **approval},
            },
            display={"platforms": {name: {"transport": "edit"}}},
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
    marker = tmp_path / "approved"
    return len(marker.read_text().splitlines()) if marker.exists() else 0


async def test_allow_once_runs_the_command_once_and_says_who_allowed_it(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)
    assert COMMAND in prompt.text, "the whole command is shown while the buttons are live"
    assert list(prompt.buttons) == ["Allow once", "Allow in this chat", "Deny"]
    assert ran(tmp_path) == 0, "nothing runs before the answer"

    await chat.press(prompt.message_id, prompt.buttons["Allow once"], owner)
    after = await closed(chat, prompt)
    await chat.changed(lambda: any(m.text == "Finished." for m in chat.messages()))
    await chat.surface.idle()

    assert after.text.startswith("✅ Allowed once by ")
    assert COMMAND in after.text
    assert ran(tmp_path) == 1
    assert "done-running" in tool_result(upstream.requests[1])
    assert chat.refusals() == []
    assert chat.unanswered() == 0, "every press was answered (no spinner left)"


async def test_deny_never_runs_and_the_model_is_told(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)
    await chat.press(prompt.message_id, prompt.buttons["Deny"], owner)
    after = await closed(chat, prompt)
    await chat.changed(lambda: any(m.text == "Finished." for m in chat.messages()))
    await chat.surface.idle()

    assert after.text.startswith("❌ Denied by ")
    assert ran(tmp_path) == 0
    told = tool_result(upstream.requests[1])
    assert "not approved" in told and "do not" in told.lower(), told


@pytest.mark.parametrize("approval_timeout", [3.0])
async def test_no_answer_times_out_never_runs_and_the_prompt_says_so(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)
    after = await closed(chat, prompt)
    await chat.changed(lambda: any(m.text == "Finished." for m in chat.messages()))
    await chat.surface.idle()

    assert after.text.startswith("⌛ No answer in time")
    assert ran(tmp_path) == 0
    assert "not approved" in tool_result(upstream.requests[1])


async def test_a_press_by_a_user_not_allowed_changes_nothing(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner, _, stranger = USERS[chat.name]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)

    await chat.press(prompt.message_id, prompt.buttons["Allow once"], stranger)
    await chat.changed(lambda: chat.refusals() == [NOT_ALLOWED])
    assert shown(chat, prompt.message_id) == prompt, "the prompt is as it was, buttons live"
    assert ran(tmp_path) == 0

    await chat.press(prompt.message_id, prompt.buttons["Deny"], owner)
    after = await closed(chat, prompt)
    await chat.surface.idle()
    assert after.text.startswith("❌ Denied by ")
    assert ran(tmp_path) == 0


async def test_two_presses_at_once_make_one_decision(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner, friend, _ = USERS[chat.name]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)

    await asyncio.gather(
        chat.press(prompt.message_id, prompt.buttons["Allow once"], owner),
        chat.press(prompt.message_id, prompt.buttons["Deny"], friend),
    )
    after = await closed(chat, prompt)
    await chat.changed(lambda: len(chat.refusals()) == 1)
    await chat.surface.idle()

    allowed = after.text.startswith("✅ Allowed once by ")
    assert allowed or after.text.startswith("❌ Denied by "), after.text
    assert ran(tmp_path) == (1 if allowed else 0)
    [refusal] = chat.refusals()
    assert chat.unanswered() == 0
    assert refusal.startswith("Already decided: " + ("once" if allowed else "deny"))


async def test_an_interrupt_while_pending_closes_the_request(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    upstream.script(
        tool_call("terminal", [json.dumps({"command": COMMAND})]),
        text("Something else."),
    )
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)

    await chat.say(owner, "never mind, something else")  # a new message interrupts the turn
    after = await closed(chat, prompt)
    await chat.changed(lambda: any(m.text == "Something else." for m in chat.messages()))
    await chat.surface.idle()

    assert after.text.startswith("⏹ Cancelled")
    assert ran(tmp_path) == 0
    assert len(upstream.requests) == 2, "the interrupted turn asked the model nothing more"


async def test_a_command_too_long_for_one_message_is_shown_whole_before_the_buttons(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    # Longer than any platform's prompt: Telegram 4096, Slack's section 3000, Discord 1000.
    words = " ".join(f"w{i}" for i in range(900))  # 4300 characters
    command = f"echo {words} > /dev/null; echo ran >> approved"
    script_tool_turn(upstream, command)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)

    before = [m.text for m in chat.messages() if m.message_id != prompt.message_id]
    assert "message above" in prompt.text or "messages above" in prompt.text
    assert len(before) >= 3, before  # the tool line, then the command in parts
    # The last messages before the prompt are the command's parts: they re-join to it whole
    # (each cut is marked).
    joined = ["".join(before[i:]).replace(CUT, "") for i in range(len(before))]
    assert command in joined, before
    await chat.press(prompt.message_id, prompt.buttons["Allow once"], owner)
    await closed(chat, prompt)
    await chat.changed(lambda: any(m.text == "Finished." for m in chat.messages()))
    await chat.surface.idle()
    assert ran(tmp_path) == 1


async def test_a_press_after_the_request_ended_is_told_so_and_runs_nothing(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)
    await chat.press(prompt.message_id, prompt.buttons["Deny"], owner)
    await closed(chat, prompt)
    await chat.surface.idle()

    # A press that was on its way when the buttons went (the same button, a second later).
    await chat.press(prompt.message_id, prompt.buttons["Allow once"], owner, stale=True)
    await chat.changed(lambda: chat.refusals() == [NOT_OPEN])
    assert ran(tmp_path) == 0


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_allow_in_this_chat_lets_the_tool_run_unasked_for_the_rest_of_the_conversation(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    script_tool_turn(upstream)
    await chat.say(owner, "run it")
    prompt = await the_prompt(chat)
    await chat.press(prompt.message_id, prompt.buttons["Allow in this chat"], owner)
    after = await closed(chat, prompt)
    await chat.changed(lambda: any(m.text == "Finished." for m in chat.messages()))
    await chat.surface.idle()
    assert after.text.startswith("✅ Allowed in this chat by ")

    upstream.script(tool_call("terminal", [json.dumps({"command": COMMAND})]), text("Again."))
    await chat.say(owner, "once more")
    await chat.changed(lambda: any(m.text == "Again." for m in chat.messages()))
    await chat.surface.idle()
    assert ran(tmp_path) == 2
    assert not any(m.buttons for m in chat.messages()), "the second call was not asked"

"""A chat platform's approval prompt answered through another process (issue 46): two chat
surfaces, each with its own runtime and Redis clients (two processes' worth), on one real
redis-server. A runs the turn with the real Telegram adapter against the fake Bot API; the
press reaches B (a bot's poller lease moved, a webhook behind a load balancer), which found
only "no longer open" before. Now B finds the prompt in the store, answers the request, and
the turn goes on in A, which closes the prompt and replies."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from iris.runtime import Runtime
from iris.surfaces.chat.platforms.base import IncomingMessage
from iris.surfaces.chat.prompts import Press, parse_press
from iris.surfaces.chat.runner import ChatSurface
from tests.chat.harness import STREAMING, running
from tests.conftest import MakeConfig, shared_workspace
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.scale.conftest import RedisServer

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]

OWNER, CHAT = 7, 42
COMMAND = "echo ran >> approved"


@contextlib.asynccontextmanager
async def other_process(config: Any) -> AsyncIterator[ChatSurface]:
    """A second process's chat surface on the same store, receiving nothing of its own (the
    first one holds the bot's poller lease); the test hands it the press."""
    runtime = Runtime.create(config)
    surface = ChatSurface(runtime, [])
    await surface.start()
    try:
        yield surface
    finally:
        await surface.stop()
        await runtime.agent.aclose()
        if runtime.shared is not None:
            await runtime.shared.aclose()
        runtime.store.close()


async def test_a_press_that_reaches_the_other_process_answers_the_turn_where_it_runs(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path, redis_server: RedisServer
) -> None:
    upstream.script(tool_call("terminal", [json.dumps({"command": COMMAND})]), text("Done."))
    async with FakeBotApi() as api:
        config = make_config(
            upstream.base_url,
            streaming=STREAMING,
            store={"path": str(tmp_path / "iris.db"), "url": redis_server.url},
            platforms={
                "api_server": {"enabled": False},
                "iris": {"enabled": False},
                "telegram": {
                    "enabled": True,
                    "token": api.token,
                    "base_url": api.base_url,
                    "poll_timeout": 1,
                    "allowed_users": [OWNER],
                    "debounce": 0,
                    "budgets": {"private_chat": {"calls": 5, "per": 1.0}},
                },
            },
            tools={
                "enabled": ["terminal"],
                "terminal": shared_workspace(tmp_path),
                "approval": {"mode": "ask", "timeout": 60},
            },
            display={"platforms": {"telegram": {"transport": "edit"}}},
        )
        async with running(config) as a, other_process(config) as b:
            api.user_says(CHAT, OWNER, "clean up")

            def prompt() -> tuple[int, str] | None:
                for message_id in api.messages.get(CHAT, {}):
                    rows = api.keyboard(CHAT, message_id)
                    for button in (b for row in rows for b in row):
                        if button["text"] == "Allow once":
                            return message_id, button["callback_data"]
                return None

            await api.wait_until(lambda: prompt() is not None, within=20)
            shown = prompt()
            assert shown is not None
            message_id, data = shown
            # A shares the prompt once Telegram took it (a press can come no sooner there).
            parsed = parse_press(data)
            assert parsed is not None
            for _ in range(200):  # a hang fails in 10 s
                if await b.prompts.lookup(parsed[0]) is not None:
                    break
                await asyncio.sleep(0.05)
            answers: list[tuple[str, bool]] = []

            async def answer(note: str, refused: bool) -> None:
                answers.append((note, refused))

            press = IncomingMessage(
                platform="telegram",
                chat_id=str(CHAT),
                user_id=str(OWNER),
                text="",
                message_id=str(message_id),
                press=Press(data, answer),
            )
            b.receive(a.platforms[0], press)  # B's own adapter would do the same
            await api.wait_until(lambda: "Done." in api.chat(CHAT), within=20)
            await a.idle()
            await b.idle()
    assert answers == [("Allow once: terminal", False)]
    assert (tmp_path / "ws" / "approved").read_text() == "ran\n"
    # A closed the prompt: the buttons went and it says who decided.
    assert api.keyboard(CHAT, message_id) == []
    assert f"by {OWNER}" in api.messages[CHAT][message_id]

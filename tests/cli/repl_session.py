"""The REPL running on a terminal of its own (a pipe in, a screen out), for the REPL's tests."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

from prompt_toolkit.input import create_pipe_input

from iris.config import Config
from iris.surfaces.cli.repl import Chat, terminal_chat
from tests.cli.terminal import Terminal
from tests.conftest import MakeConfig
from tests.fakes.upstream import (
    FakeUpstream,
)


@dataclass
class Session:
    term: Terminal
    chat: Chat
    task: asyncio.Task[int]

    def type(self, keys: str) -> None:
        self.term.type(keys)

    async def see(self, check: Any, within: float = 15.0) -> str:
        return await self.term.out.wait_for(check, within)

    async def replies(self, count: int) -> str:
        """Wait until ``count`` turns have printed their footer."""
        return await self.see(lambda t: t.count(" out tokens") + t.count("⏹") >= count)

    async def exit_code(self) -> int:
        return await asyncio.wait_for(self.task, 5)


@contextlib.asynccontextmanager
async def chat_on_terminal(
    config: Config, clock: Callable[[], float] = time.time
) -> AsyncGenerator[Session]:
    with create_pipe_input() as pipe:
        term = Terminal(pipe)
        chat = terminal_chat(config, pipe, term.output, clock)
        session = Session(term, chat, asyncio.create_task(chat.run()))
        try:
            await session.see("/help for commands")
            yield session
        except BaseException:
            session.task.cancel()
            with contextlib.suppress(BaseException):
                await session.task
            raise
        if not session.task.done():
            session.type("\x04")  # Ctrl-D
            await asyncio.wait_for(session.task, 5)


def streaming(make_config: MakeConfig, up: FakeUpstream, on: bool = True, **more: Any) -> Config:
    return make_config(up.base_url, streaming={"cli": on}, **more)

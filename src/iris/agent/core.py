"""The turn loop (placeholder: being written; the interface below is the contract)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from iris.config import Config
from iris.events import Event, TerminalEvent


@dataclass
class TurnRequest:
    """One turn. ``messages`` is the chat-format conversation ending with the new user message."""

    messages: list[dict[str, Any]]
    stream: bool = True  # stream from the provider; False asks for the whole answer at once
    client_tools: list[dict[str, Any]] | None = None  # OpenAI function tools owned by the caller
    agent_tools: bool = True  # run Iris's own tools (never mixed with client tools)
    allow_terminal: bool = True  # False for a user who is not allowed: terminal never runs
    model: str | None = None  # override the configured model name
    instructions: str | None = None  # an extra system message
    max_tokens: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])


class Turn:
    turn_id: str

    def interrupt(self, reason: str = "interrupted") -> None: ...
    def __aiter__(self) -> AsyncIterator[Event]: ...
    async def __aenter__(self) -> Turn: ...
    async def __aexit__(self, *exc: object) -> None: ...


class Agent:
    def __init__(self, config: Config) -> None:
        self.config = config

    @property
    def model_name(self) -> str: ...

    def run(self, request: TurnRequest) -> Turn: ...

    async def aclose(self) -> None: ...


async def run_with_callback(
    agent: Agent, request: TurnRequest, stream_callback: Callable[[str | None], object]
) -> TerminalEvent: ...

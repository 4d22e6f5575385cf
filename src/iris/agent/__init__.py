"""The agent: one turn = one event stream (see ``iris.events``).

Use::

    agent = Agent(config)                      # owns the provider clients and tools
    async with agent.run(TurnRequest(messages=[{"role": "user", "content": "hi"}])) as turn:
        async for event in turn:               # TurnStarted … TurnEnded | TurnFailed
            ...
        # turn.interrupt() from anywhere closes the upstream stream within 1 s; the turn then
        # ends with TurnEnded(reason="interrupted") carrying the text so far.
    await agent.aclose()

A chat that keeps its history (what every surface does) goes through a ``Conversation``
(``iris.agent.conversation``): controls, transcript, the turn, what it keeps.

``run_with_callback`` is the design's ``stream_callback(text_delta | None)`` API on top.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from iris.agent.approvals import ApprovalPolicy, Approvals, approvals_for
from iris.agent.core import Agent, Turn, TurnRequest, run_with_callback

if TYPE_CHECKING:
    from iris.agent.conversation import Conversation, TurnOptions, UserMessage

__all__ = [
    "Agent",
    "ApprovalPolicy",
    "Approvals",
    "Conversation",
    "Turn",
    "TurnOptions",
    "TurnRequest",
    "UserMessage",
    "approvals_for",
    "run_with_callback",
]

# A chat's lifecycle needs the stores, which need the agent's context code: resolved on first
# use (PEP 562), so ``iris.agent`` imports without a cycle.
_LATER = {"Conversation", "TurnOptions", "UserMessage"}


def __getattr__(name: str) -> Any:
    if name not in _LATER:
        raise AttributeError(f"module 'iris.agent' has no attribute {name!r}")
    value = getattr(importlib.import_module("iris.agent.conversation"), name)
    globals()[name] = value
    return value

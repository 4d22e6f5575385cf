"""Iris: a streaming-first AI agent gateway.

The public Python API is what ``__all__`` here and in ``iris.agent`` name (docs/agent.md, "The
public API", lists the same): the agent and its turn, the config loaders, the event vocabulary
and the exception tree. Every other module and name is internal to Iris and may change without
notice. The names resolve on first use (PEP 562), so ``import iris`` stays cheap for the
processes that only need a submodule (the embedded model's worker, ``iris --help``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the module that defines it
_EXPORTS = {
    "Agent": "iris.agent",
    "Turn": "iris.agent",
    "TurnRequest": "iris.agent",
    "run_with_callback": "iris.agent",
    "Conversation": "iris.agent",
    "UserMessage": "iris.agent",
    "TurnOptions": "iris.agent",
    "Config": "iris.config",
    "load_config": "iris.config",
    "config_from_dict": "iris.config",
    "Event": "iris.events",
    "TurnStarted": "iris.events",
    "TextDelta": "iris.events",
    "ReasoningDelta": "iris.events",
    "Commentary": "iris.events",
    "SegmentEnded": "iris.events",
    "ToolStarted": "iris.events",
    "ToolProgress": "iris.events",
    "ToolEnded": "iris.events",
    "ToolCallDelta": "iris.events",
    "ApprovalRequested": "iris.events",
    "ApprovalResolved": "iris.events",
    "StreamReset": "iris.events",
    "TurnEnded": "iris.events",
    "TurnFailed": "iris.events",
    "IrisError": "iris.errors",
    "ConfigError": "iris.errors",
    "ProviderError": "iris.errors",
    "StoreUnavailable": "iris.errors",
}

__all__ = [
    "__version__",
    "Agent",
    "Turn",
    "TurnRequest",
    "run_with_callback",
    "Conversation",
    "UserMessage",
    "TurnOptions",
    "Config",
    "load_config",
    "config_from_dict",
    "Event",
    "TurnStarted",
    "TextDelta",
    "ReasoningDelta",
    "Commentary",
    "SegmentEnded",
    "ToolStarted",
    "ToolProgress",
    "ToolEnded",
    "ToolCallDelta",
    "ApprovalRequested",
    "ApprovalResolved",
    "StreamReset",
    "TurnEnded",
    "TurnFailed",
    "IrisError",
    "ConfigError",
    "ProviderError",
    "StoreUnavailable",
]

if TYPE_CHECKING:
    from iris.agent import (
        Agent,
        Conversation,
        Turn,
        TurnOptions,
        TurnRequest,
        UserMessage,
        run_with_callback,
    )
    from iris.config import Config, config_from_dict, load_config
    from iris.errors import ConfigError, IrisError, ProviderError, StoreUnavailable
    from iris.events import (
        ApprovalRequested,
        ApprovalResolved,
        Commentary,
        Event,
        ReasoningDelta,
        SegmentEnded,
        StreamReset,
        TextDelta,
        ToolCallDelta,
        ToolEnded,
        ToolProgress,
        ToolStarted,
        TurnEnded,
        TurnFailed,
        TurnStarted,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'iris' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

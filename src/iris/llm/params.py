"""Generation parameters in one provider-neutral spelling, and which provider honours which.

``ProviderRequest.params`` holds only what a client asked for; each provider file maps these
names to its own wire names. The spelling (values are plain JSON data):

==================== ==============================================================
``temperature``      float
``top_p``            float
``stop``             list of strings
``seed``             int
``presence_penalty`` float
``frequency_penalty`` float
``logit_bias``       {token id (str): bias}
``response_format``  ``{"type": "json_object"}`` or ``{"type": "json_schema", "name",
                     "schema", "strict"?, "description"?}`` (the flat Responses spelling)
``tool_choice``      ``"required"`` or ``{"type": "function", "name": ...}`` (flat);
                     ``"auto"`` is the default and never stored, ``"none"`` sends no tools
``parallel_tool_calls`` bool
``user``, ``safety_identifier``, ``prompt_cache_key``, ``service_tier`` str
``metadata``         {str: str}
``reasoning_effort`` str; ``reasoning_summary`` str
``verbosity``        str
==================== ==============================================================

A parameter a provider cannot honour is refused before the turn starts (the API answers 400
naming it); nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

ProviderKind = Literal["chat_completions", "responses", "local"]

Params = dict[str, Any]

_SAMPLING = frozenset(
    {"temperature", "top_p", "stop", "seed", "presence_penalty", "frequency_penalty"}
)
# Who a request is for, not how to generate: the embedded model has no provider to tell.
_IDENTITY = frozenset({"user", "safety_identifier", "prompt_cache_key", "service_tier", "metadata"})

ALL: frozenset[str] = (
    _SAMPLING
    | _IDENTITY
    | {
        "logit_bias",
        "response_format",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "reasoning_summary",
        "verbosity",
    }
)

HONOURED: Mapping[ProviderKind, frozenset[str]] = {
    # Chat Completions has no way to ask for a reasoning summary.
    "chat_completions": ALL - {"reasoning_summary"},
    # The Responses API has no stop sequences, seed, penalties or logit bias.
    "responses": ALL - {"stop", "seed", "presence_penalty", "frequency_penalty", "logit_bias"},
    # llama.cpp: sampling, stops, seed and a JSON grammar; the demo model calls no tools and
    # its token ids are not OpenAI's, so a logit bias would mean something else.
    "local": _SAMPLING | _IDENTITY | {"response_format"},
}


def unhonoured(params: Mapping[str, Any], kinds: Iterable[ProviderKind]) -> list[tuple[str, str]]:
    """(parameter, provider kind) pairs some provider of ``kinds`` cannot honour."""
    refused: list[tuple[str, str]] = []
    for kind in dict.fromkeys(kinds):
        refused += [(name, kind) for name in params if name not in HONOURED[kind]]
    return refused

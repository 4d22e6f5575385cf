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
naming it); nothing is dropped silently. Two exceptions follow OpenAI's own rules upstream:
``metadata`` is kept by Iris's Responses store and not sent to a Chat Completions provider
(OpenAI refuses it there without ``store``), and ``iris.llm.chat_completions`` learns from the
provider's 400 which token-limit field and which of ``reasoning_effort`` / ``verbosity`` a
model takes.

**Extension parameters** (``EXTENSIONS``) are the sampling and routing fields that servers in
front of open models add to Chat Completions — vLLM, llama.cpp, Ollama, OpenRouter. They keep
their own names (neutral name = wire name) and go to a ``chat_completions`` provider as the
client sent them; the embedded model takes the ones llama.cpp has (``LOCAL_EXTENSIONS``); a
``responses`` provider (OpenAI's own API) takes none. ``model.extra_params`` adjusts the list
per endpoint: ``allow`` adds names, ``deny`` refuses names, ``set`` sends values on every
request (a client's own value replaces it unless the name is denied).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from iris.config import ModelEndpoint

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


# What each extension's value must be: "number", "integer", "boolean", "string", "object", or
# "any" (passed on as sent; the backend reads it).
_NUMBER, _INT, _BOOL, _STR, _OBJ, _ANY = "number", "integer", "boolean", "string", "object", "any"

SAMPLING_EXTENSIONS: Mapping[str, str] = {
    # vLLM, llama.cpp, Ollama, OpenRouter
    "top_k": _INT,
    "min_p": _NUMBER,
    "top_a": _NUMBER,  # OpenRouter
    "typical_p": _NUMBER,
    "repetition_penalty": _NUMBER,  # vLLM, OpenRouter
    "repeat_penalty": _NUMBER,  # llama.cpp, Ollama
    "repeat_last_n": _INT,
    "tfs_z": _NUMBER,
    "mirostat": _INT,
    "mirostat_tau": _NUMBER,
    "mirostat_eta": _NUMBER,
    "dynatemp_range": _NUMBER,
    "dynatemp_exponent": _NUMBER,
    "xtc_probability": _NUMBER,
    "xtc_threshold": _NUMBER,
    "dry_multiplier": _NUMBER,
    "dry_base": _NUMBER,
    "dry_allowed_length": _INT,
    "dry_penalty_last_n": _INT,
    "length_penalty": _NUMBER,  # vLLM
    "min_tokens": _INT,  # vLLM
}
EXTENSIONS: Mapping[str, str] = {
    **SAMPLING_EXTENSIONS,
    # llama.cpp
    "cache_prompt": _BOOL,
    "n_keep": _INT,
    "n_probs": _INT,
    "samplers": _ANY,
    "grammar": _STR,
    "json_schema": _OBJ,
    "id_slot": _INT,
    "reasoning_format": _STR,
    # vLLM: structured output, stop tokens, the chat template's switches (Qwen's enable_thinking)
    "guided_json": _ANY,
    "guided_regex": _STR,
    "guided_choice": _ANY,
    "guided_grammar": _STR,
    "guided_decoding_backend": _STR,
    "guided_whitespace_pattern": _STR,
    "structured_outputs": _OBJ,
    "stop_token_ids": _ANY,
    "ignore_eos": _BOOL,
    "skip_special_tokens": _BOOL,
    "spaces_between_special_tokens": _BOOL,
    "include_stop_str_in_output": _BOOL,
    "bad_words": _ANY,
    "chat_template_kwargs": _OBJ,
    "enable_thinking": _BOOL,  # the same switch, top-level (DashScope, SiliconFlow)
    "priority": _INT,
    # Ollama (its OpenAI endpoint; the same names as in its native ``options``)
    "num_ctx": _INT,
    "num_keep": _INT,
    "num_batch": _INT,
    "num_thread": _INT,
    "num_gpu": _INT,
    "num_predict": _INT,
    "use_mmap": _BOOL,
    "use_mlock": _BOOL,
    "keep_alive": _ANY,
    "think": _ANY,
    "format": _ANY,  # "json" or a JSON schema
    # OpenRouter: reasoning, provider routing, fallbacks, transforms
    "reasoning": _OBJ,
    "include_reasoning": _BOOL,
    "provider": _OBJ,
    "models": _ANY,
    "route": _STR,
    "transforms": _ANY,
    "plugins": _ANY,
    "usage": _OBJ,
}

# What the embedded model takes of the extensions: llama.cpp ``/completion`` fields under the
# same names (``repetition_penalty`` is llama.cpp's ``repeat_penalty``).
LOCAL_EXTENSIONS = frozenset(
    {
        "top_k",
        "min_p",
        "typical_p",
        "repetition_penalty",
        "repeat_penalty",
        "repeat_last_n",
        "mirostat",
        "mirostat_tau",
        "mirostat_eta",
        "dynatemp_range",
        "dynatemp_exponent",
        "xtc_probability",
        "xtc_threshold",
        "dry_multiplier",
        "dry_base",
        "dry_allowed_length",
        "dry_penalty_last_n",
        "cache_prompt",
        "n_keep",
    }
)

_EXTENDED: Mapping[ProviderKind, frozenset[str]] = {
    "chat_completions": frozenset(EXTENSIONS),
    "responses": frozenset(),
    "local": LOCAL_EXTENSIONS,
}


def accepted(endpoint: ModelEndpoint) -> frozenset[str]:
    """Every parameter name ``endpoint`` takes: its kind's, its extensions, ``allow`` added,
    ``deny`` taken away."""
    extra = endpoint.extra_params
    names = HONOURED[endpoint.provider] | _EXTENDED[endpoint.provider] | set(extra.allow)
    return names - set(extra.deny)


def known_extensions(endpoints: Iterable[ModelEndpoint]) -> frozenset[str]:
    """Extension names some provider takes, or that the operator allowed somewhere: a request
    field by such a name is read (and then refused only where a provider cannot take it)."""
    names = set(EXTENSIONS)
    for endpoint in endpoints:
        names.update(endpoint.extra_params.allow)
    return frozenset(names - ALL)


def unhonoured(
    params: Mapping[str, Any], endpoints: Iterable[ModelEndpoint]
) -> list[tuple[str, str]]:
    """(parameter, provider kind) pairs some endpoint of ``endpoints`` cannot honour."""
    refused: list[tuple[str, str]] = []
    for endpoint in endpoints:
        takes = accepted(endpoint)
        refused += [(name, endpoint.provider) for name in params if name not in takes]
    return refused


def extension_problem(name: str, value: Any) -> str | None:
    """What is wrong with an extension's value, or None (names off the list: None)."""
    kind = EXTENSIONS.get(name, _ANY)
    fits = {
        _NUMBER: isinstance(value, int | float) and not isinstance(value, bool),
        _INT: isinstance(value, int) and not isinstance(value, bool),
        _BOOL: isinstance(value, bool),
        _STR: isinstance(value, str),
        _OBJ: isinstance(value, dict),
        _ANY: True,
    }[kind]
    return None if fits else f"must be {'an' if kind[0] in 'aeiou' else 'a'} {kind}"

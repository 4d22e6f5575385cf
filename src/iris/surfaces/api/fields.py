"""Which request fields each API acts on, and the few it may ignore: nothing is dropped silently.

A field of a request body is either *handled* (``bodies`` / ``params`` read it and act on it,
or refuse a value they cannot honour with a 400 naming it) or on the *ignore list*: a hint whose
absence changes nothing a client can notice in the answer (a cache or latency hint, extra data
Iris has none of). Any other field with a value — one the API defines that Iris does not act
on (``prompt``, ``audio``, ``web_search_options``), or one it does not define (a typo such as
``temprature``, another server's extension) — is a 400 with ``code: "unsupported_parameter"``
naming it, before any work. A field sent as ``null`` counts as absent, as on OpenAI.
The extension parameters of ``iris.llm.params`` (``top_k``, ``min_p``...) are handled too: read
by ``params`` and refused there, naming the provider, where the configured one cannot take them.

``tests/api/test_fields.py`` walks the openai SDK's request types (``CompletionCreateParams``,
``ResponseCreateParams``) and checks every key is handled or ignored here, so a field a new SDK
adds cannot slip through unnoticed.
"""

from __future__ import annotations

from typing import Any

from iris.surfaces.api.problems import bad_request

CHAT_HANDLED = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "n",
        "response_format",
        "verbosity",
        "reasoning_effort",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "functions",
        "function_call",
        "max_tokens",
        "max_completion_tokens",
        "user",
        "safety_identifier",
        "prompt_cache_key",
        "service_tier",
        "metadata",
        "modalities",
        "store",
    }
)

RESPONSES_HANDLED = frozenset(
    {
        "model",
        "input",
        "instructions",
        "previous_response_id",
        "conversation",
        "stream",
        "store",
        "background",
        "temperature",
        "top_p",
        "top_logprobs",
        "presence_penalty",
        "frequency_penalty",
        "text",
        "reasoning",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "max_tool_calls",
        "truncation",
        "user",
        "safety_identifier",
        "prompt_cache_key",
        "service_tier",
        "metadata",
    }
)

# Safe to ignore: what each would change, Iris has nothing of, or it is a hint only.
SHARED_IGNORED = {
    "prompt_cache_retention": "how long the provider keeps a prompt cache: a cost hint",
    "prompt_cache_options": "prompt caching options: a cost hint",
}
CHAT_IGNORED = {
    **SHARED_IGNORED,
    "prediction": "predicted output, a latency hint: the answer is the same without it",
}
RESPONSES_IGNORED = {
    **SHARED_IGNORED,
    "include": "extra output data (encrypted reasoning, logprobs, tool results) Iris has none of",
    "stream_options": "stream obfuscation padding: Iris sends none",
}


def refuse_unhandled(
    body: dict[str, Any], handled: frozenset[str], ignored: dict[str, str]
) -> None:
    """A 400 naming the first field of ``body`` neither handled nor safe to ignore."""
    for key, value in body.items():
        if value is None or key in handled or key in ignored:
            continue
        raise bad_request(
            f"'{key}' is not supported by Iris (it would be ignored, so it is refused)",
            param=key,
            code="unsupported_parameter",
        )

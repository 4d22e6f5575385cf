"""What each provider puts on the wire for the neutral parameters: Chat Completions and
Responses names, and the llama.cpp ``/completion`` fields the embedded model gets."""

from __future__ import annotations

import json
from typing import Any

from iris.llm.chat_completions import request_body as chat_body
from iris.llm.local import completion_body
from iris.llm.params import ALL, HONOURED
from iris.llm.provider import ProviderRequest
from iris.llm.responses_api import request_body as responses_body

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
FORMAT = {"type": "json_schema", "name": "A", "schema": SCHEMA, "strict": True}


def ask(params: dict[str, Any], tools: list[dict[str, Any]] | None = None) -> ProviderRequest:
    return ProviderRequest("m", MESSAGES, tools or [], 64, params)


def test_chat_completions_names() -> None:
    params = {
        "temperature": 0.2,
        "stop": ["x"],
        "seed": 3,
        "logit_bias": {"5": 1},
        "response_format": FORMAT,
        "tool_choice": {"type": "function", "name": "f"},
        "parallel_tool_calls": False,
        "reasoning_effort": "high",
        "verbosity": "low",
        "metadata": {"k": "v"},
    }
    body = chat_body(ask(params, TOOLS))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "A", "schema": SCHEMA, "strict": True},
    }
    assert body["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    for key in ("temperature", "stop", "seed", "logit_bias", "parallel_tool_calls"):
        assert body[key] == params[key]
    assert body["reasoning_effort"] == "high" and body["verbosity"] == "low"
    assert body["max_tokens"] == 64 and body["messages"] == MESSAGES
    json.dumps(body)  # plain data


def test_responses_names() -> None:
    params = {
        "temperature": 0.2,
        "response_format": FORMAT,
        "verbosity": "low",
        "tool_choice": "required",
        "reasoning_effort": "high",
        "reasoning_summary": "auto",
        "service_tier": "flex",
    }
    body = responses_body(ask(params, TOOLS))
    assert body["text"] == {"format": FORMAT, "verbosity": "low"}
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert body["tool_choice"] == "required"
    assert body["temperature"] == 0.2 and body["service_tier"] == "flex"
    assert body["instructions"] == "be brief" and body["max_output_tokens"] == 64


def test_a_round_without_tools_sends_no_tool_choice() -> None:
    # The agent's last round offers no tools; OpenAI rejects tool_choice without tools.
    params = {"tool_choice": "required", "parallel_tool_calls": False}
    for build in (chat_body, responses_body):
        body = build(ask(params))
        assert "tool_choice" not in body and "parallel_tool_calls" not in body


def test_the_embedded_model_gets_sampling_stops_seed_and_a_json_schema() -> None:
    params = {
        "temperature": 0.1,
        "top_p": 0.5,
        "stop": ["END"],
        "seed": 42,
        "presence_penalty": 0.3,
        "frequency_penalty": 0.2,
        "response_format": FORMAT,
        "user": "u",  # identity only: nothing for llama.cpp
    }
    body = completion_body(ask(params), plain=True)
    assert body["temperature"] == 0.1 and body["top_p"] == 0.5
    assert body["seed"] == 42 and body["presence_penalty"] == 0.3
    assert body["frequency_penalty"] == 0.2
    assert body["n_predict"] == 64 and body["stream"] is True
    assert "END" in body["stop"] and "\nUser:" in body["stop"]  # the turn marker stays
    assert body["json_schema"] == SCHEMA  # llama.cpp makes the grammar the sampler follows
    assert "user" not in body
    # Through the model's own chat template the turn ends at its end-of-turn token instead.
    assert completion_body(ask(params), plain=False)["stop"] == ["END"]


def test_the_embedded_model_defaults_and_json_object() -> None:
    plain = completion_body(ProviderRequest("m", MESSAGES), plain=True)
    assert plain["temperature"] == 0.7 and plain["n_predict"] == 200
    assert "json_schema" not in plain and "seed" not in plain
    as_object = completion_body(ask({"response_format": {"type": "json_object"}}), plain=True)
    assert as_object["json_schema"] == {"type": "object"}


def test_every_parameter_a_provider_honours_is_mapped() -> None:
    """A name in ``HONOURED`` must change the wire body (or the llama.cpp keywords)."""
    values: dict[str, Any] = {
        "temperature": 0.5,
        "top_p": 0.5,
        "stop": ["s"],
        "seed": 1,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.5,
        "logit_bias": {"1": 1},
        "response_format": FORMAT,
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "user": "u",
        "safety_identifier": "s",
        "prompt_cache_key": "p",
        "service_tier": "flex",
        "metadata": {"k": "v"},
        "reasoning_effort": "low",
        "reasoning_summary": "auto",
        "verbosity": "low",
    }
    assert set(values) == ALL
    builders = {"chat_completions": chat_body, "responses": responses_body}
    # Chat Completions: metadata is Iris's to keep (OpenAI takes it only with store).
    kept = {"chat_completions": {"metadata"}, "responses": set[str]()}
    for kind, build in builders.items():
        bare = build(ask({}, TOOLS))
        for name in HONOURED[kind] - kept[kind]:
            assert build(ask({name: values[name]}, TOOLS)) != bare, (kind, name)
    bare_local = completion_body(ask({}), plain=True)
    identity = {"user", "safety_identifier", "prompt_cache_key", "service_tier", "metadata"}
    for name in HONOURED["local"] - identity:
        assert completion_body(ask({name: values[name]}), plain=True) != bare_local, name

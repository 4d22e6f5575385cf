"""Generation parameters and per-request caps, as the body parser sees them: both APIs'
spellings become one neutral dict, a provider that cannot honour one is a 400 naming it, the
Response object echoes what was applied, and oversized requests are refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from iris.config import Config, config_from_dict
from iris.surfaces.api.bodies import Stored, parse_chat, parse_responses
from iris.surfaces.api.problems import ApiError

MODELS = ["m"]
USER = [{"role": "user", "content": "x"}]
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


def config(provider: str = "chat_completions", **api_server: Any) -> Config:
    model = {"provider": provider, "base_url": "http://127.0.0.1:9/v1", "name": "m"}
    data: dict[str, Any] = {"model": model, "platforms": {"api_server": api_server}}
    return config_from_dict(data, env={})


def chat(body: dict[str, Any], cfg: Config | None = None) -> dict[str, Any]:
    call = parse_chat({"messages": USER, **body}, models=MODELS, config=cfg or config())
    return call.turn.params


def responses(body: dict[str, Any], cfg: Config | None = None) -> dict[str, Any]:
    call = parse_responses({"input": "x", **body}, models=MODELS, config=cfg or config())
    return call.turn.params


def refused(parse: Any, body: dict[str, Any], cfg: Config | None = None) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse(body, cfg)
    assert caught.value.status == 400
    return caught.value


def test_both_spellings_of_a_json_schema_become_one() -> None:
    chat_spelling = {
        "type": "json_schema",
        "json_schema": {"name": "A", "schema": SCHEMA, "strict": True},
    }
    flat = {"type": "json_schema", "name": "A", "schema": SCHEMA, "strict": True}
    assert chat({"response_format": chat_spelling})["response_format"] == flat
    assert responses({"text": {"format": flat}})["response_format"] == flat
    # Plain text is the default: nothing to send.
    assert "response_format" not in chat({"response_format": {"type": "text"}})


def test_both_spellings_of_reasoning_and_tool_choice_become_one() -> None:
    named_chat = {"type": "function", "function": {"name": "f"}}
    named_flat = {"type": "function", "name": "f"}
    from_chat = chat({"reasoning_effort": "low", "tools": [TOOL], "tool_choice": named_chat})
    from_responses = responses(
        {"reasoning": {"effort": "low"}, "tools": [TOOL], "tool_choice": named_flat},
        config("responses"),
    )
    assert from_chat == from_responses == {"reasoning_effort": "low", "tool_choice": named_flat}


def test_defaults_are_not_sent_and_unknown_fields_are_refused() -> None:
    assert chat({"tool_choice": "auto", "n": 1, "logprobs": False}) == {}
    assert refused(chat, {"frobnicate": 1}).param == "frobnicate"
    assert refused(responses, {"seed": 3}).param == "seed"  # not a Responses field


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"temperature": 3}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"top_p": -0.1}, "top_p"),
        ({"stop": [1]}, "stop"),
        ({"seed": 1.5}, "seed"),
        ({"logit_bias": {"1": "x"}}, "logit_bias"),
        ({"metadata": {"k": 1}}, "metadata"),
        ({"n": 3}, "n"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"response_format": {"type": "yaml"}}, "response_format.type"),
        ({"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
        ({"tool_choice": "required"}, "tool_choice"),  # no tools to require
        ({"tool_choice": {"type": "function", "function": {"name": "g"}}, "tools": [TOOL]}, "tool_choice"),
    ],
)  # fmt: skip
def test_bad_parameters_are_named(body: dict[str, Any], param: str) -> None:
    assert refused(chat, body).param == param


@pytest.mark.parametrize(
    ("provider", "body", "param"),
    [
        ("responses", {"stop": "x"}, "stop"),
        ("responses", {"presence_penalty": 1}, "presence_penalty"),
        ("local", {"logit_bias": {"1": 1}}, "logit_bias"),
        ("local", {"reasoning_effort": "low"}, "reasoning_effort"),
        ("local", {"tools": [TOOL], "tool_choice": "required"}, "tool_choice"),
    ],
)
def test_a_parameter_the_provider_cannot_honour_is_named(
    provider: str, body: dict[str, Any], param: str
) -> None:
    error = refused(chat, body, config(provider))
    assert error.param == param and provider in error.message


def test_every_provider_of_the_fallback_chain_must_honour_it() -> None:
    cfg = config_from_dict(
        {
            "model": {
                "provider": "chat_completions",
                "base_url": "http://127.0.0.1:9/v1",
                "name": "m",
                "fallback": [{"provider": "responses", "base_url": "http://x/v1", "name": "n"}],
            }
        },
        env={},
    )
    assert refused(chat, {"seed": 1}, cfg).param == "seed"


def test_the_local_model_takes_what_llama_cpp_can_do() -> None:
    body = {
        "temperature": 0.1,
        "top_p": 0.5,
        "stop": "END",
        "seed": 1,
        "user": "u",
        "response_format": {"type": "json_object"},
    }
    assert chat(body, config("local"))["stop"] == ["END"]


def test_the_response_echoes_what_was_applied() -> None:
    call = parse_responses(
        {
            "input": "x",
            "temperature": 0.5,
            "text": {"format": {"type": "json_object"}},
            "reasoning": {"effort": "low", "summary": "auto"},
            "tools": [{"type": "function", "name": "f"}],
            "tool_choice": "required",
        },
        models=MODELS,
        config=config("responses"),
    )
    echo = call.echo
    assert echo["temperature"] == 0.5
    assert echo["text"] == {"format": {"type": "json_object"}}
    assert echo["reasoning"] == {"effort": "low", "summary": "auto"}
    assert echo["tool_choice"] == "required"
    off = parse_responses({"input": "x", "tool_choice": "none"}, models=MODELS, config=config())
    assert off.echo["tool_choice"] == "none" and off.turn.agent_tools is False
    # Nothing echoed that was not applied: defaults stay the encoder's.
    plain = parse_responses(
        {"input": "x", "include": ["reasoning.encrypted_content"]},
        models=MODELS,
        config=config(),
    )
    assert "text" not in plain.echo and "temperature" not in plain.echo


# -- caps --------------------------------------------------------------------------------


def test_too_many_messages_is_refused_by_name() -> None:
    cfg = config(max_messages=3)
    error = refused(chat, {"messages": USER * 4}, cfg)
    assert error.param == "messages" and error.code == "too_many_messages"
    assert "3" in error.message and "max_messages" in error.message
    chat({"messages": USER * 3}, cfg)  # at the cap: fine
    assert refused(responses, {"input": USER * 4}, cfg).param == "input"


def test_too_many_characters_is_refused_by_name() -> None:
    cfg = config(max_input_chars=10)
    error = refused(chat, {"messages": [{"role": "user", "content": "x" * 11}]}, cfg)
    assert error.code == "input_too_long" and "max_input_chars" in error.message
    parts = [{"type": "text", "text": "x" * 6}, {"type": "text", "text": "y" * 6}]
    assert refused(chat, {"messages": [{"role": "user", "content": parts}]}, cfg)
    # Instructions count too; a previous response's stored conversation as well.
    assert refused(responses, {"input": "abc", "instructions": "x" * 8}, cfg)
    chat({"messages": [{"role": "user", "content": "x" * 10}]}, cfg)


def test_the_previous_conversation_counts_toward_the_caps() -> None:
    cfg = config(max_messages=3)
    with pytest.raises(ApiError) as caught:
        parse_responses(
            {"input": "x", "previous_response_id": "r"},
            models=MODELS,
            config=cfg,
            stored=Stored(history=USER * 3),
        )
    assert caught.value.param == "input"

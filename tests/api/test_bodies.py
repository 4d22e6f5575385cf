"""Request bodies: whatever JSON arrives, the parser answers with a TurnRequest or a 4xx
ApiError naming the field — never another exception (which would be a 500)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iris.config import config_from_dict
from iris.surfaces.api.bodies import Stored, input_messages, parse_chat, parse_responses, references
from iris.surfaces.api.problems import ApiError

CONFIG = config_from_dict({}, env={})
MODELS = ["m"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
roles = st.sampled_from(["system", "developer", "user", "assistant", "tool", "wizard", None])
keys = st.sampled_from(
    ["role", "content", "type", "text", "image_url", "tool_calls", "tool_call_id", "call_id",
     "name", "arguments", "output", "function", "id"]
)  # fmt: skip
items = st.dictionaries(keys, json_values | roles, max_size=6)
chat_bodies = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(["m", "x", "", None, 3]),
        "messages": st.lists(items, max_size=4) | json_values,
        "stream": json_values,
        "stream_options": json_values,
        "tools": st.lists(st.dictionaries(keys, json_values, max_size=3), max_size=2) | json_values,
        "tool_choice": json_values,
        "max_tokens": json_values,
        "temperature": json_values,
        "stop": json_values,
        "seed": json_values,
        "n": json_values,
        "logit_bias": json_values,
        "response_format": json_values
        | st.fixed_dictionaries({"type": st.just("json_schema"), "json_schema": json_values}),
    },
)
responses_bodies = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(["m", "x", None]),
        "input": st.lists(items, max_size=4) | json_values,
        "instructions": json_values,
        "previous_response_id": st.sampled_from(["resp_known", "resp_unknown", None, 5]),
        "metadata": json_values,
        "temperature": json_values,
        "tools": json_values,
        "store": json_values,
        "tool_choice": json_values,
        "text": json_values | st.fixed_dictionaries({"format": json_values}),
        "reasoning": json_values,
    },
)


def history(response_id: str) -> list[dict[str, Any]] | None:
    return [{"role": "user", "content": "before"}] if response_id == "resp_known" else None


@settings(max_examples=100, deadline=None)
@given(chat_bodies | json_values)
def test_any_chat_body_parses_or_is_a_4xx(body: Any) -> None:
    try:
        call = parse_chat(body, models=MODELS, config=CONFIG)
    except ApiError as error:
        assert 400 <= error.status < 500
        assert error.message
    else:
        assert call.turn.messages
        assert all(m["role"] in {"system", "user", "assistant", "tool"} for m in call.turn.messages)


@settings(max_examples=100, deadline=None)
@given(responses_bodies | json_values)
def test_any_responses_body_parses_or_is_a_4xx(body: Any) -> None:
    try:
        named = references(body, CONFIG)
        stored = Stored(history(named.previous_response_id or ""), None)
        call = parse_responses(body, models=MODELS, config=CONFIG, stored=stored)
    except ApiError as error:
        assert 400 <= error.status < 500
        assert error.message
    else:
        assert call.turn.messages == call.history


def test_client_tools_switch_the_agent_tools_off() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    body = {"messages": [{"role": "user", "content": "x"}], "tools": [tool]}
    call = parse_chat(body, models=MODELS, config=CONFIG)
    assert call.turn.client_tools == [tool]
    assert call.turn.agent_tools is False
    keyed = config_from_dict({"platforms": {"api_server": {"api_key": "k"}}}, env={})
    models = [*MODELS, "iris-agent"]
    agent = {"model": "iris-agent", "messages": body["messages"]}
    asked = parse_chat(agent, models=models, config=keyed)
    assert asked.turn.client_tools is None and asked.turn.agent_tools is True
    # The plain model is the model alone: the agent is opted into (agent_tools: on_request).
    plain = parse_chat({"messages": body["messages"]}, models=models, config=keyed)
    assert plain.turn.agent_tools is False
    with_tools = parse_chat({**agent, "tools": [tool]}, models=models, config=keyed)
    assert with_tools.turn.agent_tools is False and with_tools.turn.client_tools == [tool]
    # Without an API key, API callers are offered none of Iris's own tools.
    keyless = parse_chat(agent, models=models, config=CONFIG)
    assert keyless.turn.agent_tools is False


def test_responses_flat_tools_become_chat_tools() -> None:
    body = {"input": "x", "tools": [{"type": "function", "name": "f", "parameters": {}}]}
    call = parse_responses(body, models=MODELS, config=CONFIG)
    assert call.turn.client_tools == [
        {"type": "function", "function": {"name": "f", "parameters": {}}}
    ]
    assert call.echo["tools"][0]["name"] == "f"


def test_function_calls_join_the_assistant_message_before_them() -> None:
    messages = input_messages(
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "let me check"}]},
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "b", "name": "g", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": "1"},
            {"type": "function_call_output", "call_id": "b", "output": "2"},
        ]
    )
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert messages[1]["content"] == "let me check"
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["a", "b"]


@pytest.mark.parametrize("model", ["x", 3])
def test_a_model_that_is_not_served_is_named(model: Any) -> None:
    with pytest.raises(ApiError) as caught:
        parse_chat(
            {"model": model, "messages": [{"role": "user", "content": "x"}]},
            models=MODELS,
            config=CONFIG,
        )
    assert caught.value.param == "model"

"""Extension parameters (``top_k``, ``min_p``, OpenRouter's ``provider``...) through the API: the
official openai SDK against Iris on a real socket, the scripted upstream behind it.

vLLM, llama.cpp, Ollama and OpenRouter honour these; OpenAI's own API refuses them. Iris passes
the known ones to a ``chat_completions`` provider as sent, refuses them for a ``responses``
provider with a 400 naming the field and the provider, and still refuses a name nobody knows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai import BadRequestError, OpenAI

from iris.config import config_from_dict
from iris.llm.params import EXTENSIONS, LOCAL_EXTENSIONS
from iris.surfaces.api.bodies import parse_chat, parse_responses
from iris.surfaces.api.problems import ApiError
from tests.api.conftest import IrisServer, StartIris
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "hi"}]
SAMPLING = {"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "typical_p": 0.95}
OPENROUTER = {
    "reasoning": {"effort": "high", "exclude": True},
    "provider": {"order": ["groq", "together"], "allow_fallbacks": False},
}
QWEN = {"chat_template_kwargs": {"enable_thinking": False}}


def client_for(server: IrisServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10)


def refusal(caught: pytest.ExceptionInfo[BadRequestError]) -> tuple[str, str, str]:
    body: Any = caught.value.body
    return body["code"], body["param"], body["message"]


def test_sampling_routing_and_template_fields_reach_a_chat_provider_as_sent(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    upstream.script(text("ok"))
    with client_for(server) as client:
        reply = client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            extra_body={**SAMPLING, **OPENROUTER, **QWEN, "guided_json": {"type": "object"}},
        )
    assert reply.choices[0].message.content == "ok"
    body = upstream.wait_for_request().body
    for key, value in {**SAMPLING, **OPENROUTER, **QWEN}.items():
        assert body[key] == value, key
    assert body["guided_json"] == {"type": "object"}


def test_a_literal_extra_body_field_is_unpacked(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    """Some clients send the SDK keyword itself as a field: {"extra_body": {"top_k": 20}}."""
    server = iris_server()
    upstream.script(text("ok"))
    with client_for(server) as client:
        client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            extra_body={"extra_body": {"top_k": 20, "temperature": 0.3}},
        )
        body = upstream.wait_for_request().body
        assert body["top_k"] == 20 and body["temperature"] == 0.3
        assert "extra_body" not in body
        with pytest.raises(BadRequestError) as twice:
            client.chat.completions.create(
                model="fake-model",
                messages=USER,  # pyright: ignore[reportArgumentType]
                temperature=0.5,
                extra_body={"extra_body": {"temperature": 0.3}},
            )
        assert refusal(twice)[:2] == ("invalid_value", "extra_body.temperature")
        with pytest.raises(BadRequestError) as not_object:
            client.chat.completions.create(
                model="fake-model",
                messages=USER,  # pyright: ignore[reportArgumentType]
                extra_body={"extra_body": [1]},
            )
        assert refusal(not_object)[:2] == ("invalid_type", "extra_body")
    assert len(upstream.requests) == 1


def test_a_responses_provider_refuses_them_naming_field_and_provider(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server(model={"provider": "responses"})
    with client_for(server) as client, pytest.raises(BadRequestError) as caught:
        client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            extra_body={"top_k": 20},
        )
    code, param, message = refusal(caught)
    assert (code, param) == ("unsupported_parameter", "top_k")
    assert "(responses)" in message
    assert upstream.requests == []


def test_a_name_on_no_list_is_still_refused_as_unknown(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    with client_for(server) as client, pytest.raises(BadRequestError) as caught:
        client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            extra_body={"top_kk": 20},
        )
    code, param, message = refusal(caught)
    assert (code, param) == ("unsupported_parameter", "top_kk")
    assert "not supported by Iris" in message
    assert upstream.requests == []


def test_a_wrong_type_is_a_400_naming_the_field(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    with client_for(server) as client, pytest.raises(BadRequestError) as caught:
        client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            extra_body={"top_k": "twenty"},
        )
    assert refusal(caught)[:2] == ("invalid_type", "top_k")
    assert upstream.requests == []


def test_extra_params_allow_deny_and_set_per_model(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server(
        model={
            "extra_params": {
                "allow": ["vendor_boost"],
                "deny": ["top_k", "chat_template_kwargs"],
                "set": {"chat_template_kwargs": {"enable_thinking": False}, "min_p": 0.1},
            }
        }
    )
    upstream.script(text("one"), text("two"))
    with client_for(server) as client:
        client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            extra_body={"vendor_boost": 2},
        )
        client.chat.completions.create(
            model="fake-model",
            messages=USER,  # pyright: ignore[reportArgumentType]
            extra_body={"min_p": 0.3},
        )
        with pytest.raises(BadRequestError) as denied:
            client.chat.completions.create(
                model="fake-model",
                messages=USER,  # pyright: ignore[reportArgumentType]
                extra_body={"chat_template_kwargs": {"enable_thinking": True}},
            )
    first, second = (request.body for request in upstream.requests)
    assert first["vendor_boost"] == 2  # allowed for this model
    # ``set`` goes with every request; a client's own value replaces one that is not denied.
    assert first["chat_template_kwargs"] == {"enable_thinking": False} and first["min_p"] == 0.1
    assert second["min_p"] == 0.3
    assert refusal(denied)[:2] == ("unsupported_parameter", "chat_template_kwargs")


def test_the_responses_api_carries_them_to_a_chat_provider_too(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    upstream.script(text("ok"))
    with client_for(server) as client:
        response = client.responses.create(
            model="fake-model", input="hi", extra_body={"top_k": 5, "min_p": 0.1}
        )
    assert response.output_text == "ok"
    body = upstream.wait_for_request().body
    assert body["top_k"] == 5 and body["min_p"] == 0.1


def test_a_responses_provider_in_the_fallback_chain_refuses_them_too() -> None:
    config = config_from_dict(
        {"model": {"name": "m", "fallback": [{"provider": "responses", "name": "r"}]}}, env={}
    )
    with pytest.raises(ApiError) as caught:
        parse_chat({"messages": USER, "top_k": 3}, models=["m"], config=config)
    assert caught.value.status == 400 and "(responses)" in caught.value.message


def test_a_responses_provider_cannot_be_given_extensions_in_config() -> None:
    from iris.errors import ConfigError

    with pytest.raises(ConfigError, match="extra_params"):
        config_from_dict(
            {"model": {"provider": "responses", "extra_params": {"set": {"top_k": 3}}}}, env={}
        )


# -- the property: on every list, each provider kind takes it or names it -------------------

CHAT = config_from_dict({"model": {"provider": "chat_completions", "name": "m"}}, env={})
RESPONSES = config_from_dict({"model": {"provider": "responses", "name": "m"}}, env={})
LOCAL = config_from_dict({"model": {"provider": "local"}}, env={})


def _value(kind: str) -> st.SearchStrategy[Any]:
    return {
        "number": st.floats(0, 2, allow_nan=False),
        "integer": st.integers(0, 100),
        "boolean": st.booleans(),
        "string": st.text(min_size=1, max_size=5),
        "object": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        "any": st.one_of(st.integers(), st.text(max_size=3), st.booleans()),
    }[kind]


_EXTENSION = st.sampled_from(sorted(EXTENSIONS)).flatmap(
    lambda name: st.tuples(st.just(name), _value(EXTENSIONS[name]))
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_EXTENSION, min_size=1, max_size=4, unique_by=lambda pair: pair[0]))
def test_every_known_extension_is_taken_or_refused_by_name(pairs: list[tuple[str, Any]]) -> None:
    fields = dict(pairs)
    body = {"messages": USER, **fields}
    chat = parse_chat(body, models=["m"], config=CHAT)
    assert chat.turn.params == fields  # as sent, nothing renamed or dropped
    with pytest.raises(ApiError) as caught:
        parse_chat(body, models=["m"], config=RESPONSES)
    assert caught.value.status == 400 and caught.value.param in fields
    # /v1/responses reads its own ``reasoning`` (chat's is OpenRouter's): the rest is refused.
    others = {name: value for name, value in fields.items() if name != "reasoning"}
    if others:
        with pytest.raises(ApiError) as caught:
            parse_responses({"input": "hi", **others}, models=["m"], config=RESPONSES)
        assert caught.value.status == 400 and caught.value.param in others
    refused = [name for name in fields if name not in LOCAL_EXTENSIONS]
    if refused:
        with pytest.raises(ApiError) as caught:
            parse_chat(body, models=["gemma-3-270m"], config=LOCAL)
        assert caught.value.param == refused[0] and "(local)" in caught.value.message
    else:
        taken = parse_chat(body, models=["gemma-3-270m"], config=LOCAL)
        assert taken.turn.params == fields

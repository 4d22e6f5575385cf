"""Nothing a client sends is dropped silently: each field of the SDKs' request types is handled
or on the documented ignore list, and any other field is a 400 naming it."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from openai import BadRequestError, OpenAI
from openai.types.chat import completion_create_params
from openai.types.responses import response_create_params

from iris.surfaces.api.fields import (
    CHAT_HANDLED,
    CHAT_IGNORED,
    RESPONSES_HANDLED,
    RESPONSES_IGNORED,
)
from tests.api.conftest import StartIris
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(30)


def sdk_keys(*types: Any) -> set[str]:
    return {key for kind in types for key in typing.get_type_hints(kind)}


CHAT_KEYS = sdk_keys(
    completion_create_params.CompletionCreateParamsNonStreaming,
    completion_create_params.CompletionCreateParamsStreaming,
)
RESPONSES_KEYS = sdk_keys(
    response_create_params.ResponseCreateParamsNonStreaming,
    response_create_params.ResponseCreateParamsStreaming,
)
# Fields the SDK defines that Iris does not act on: each is refused (a 400 naming it).
CHAT_REFUSED = CHAT_KEYS - CHAT_HANDLED - set(CHAT_IGNORED)
RESPONSES_REFUSED = RESPONSES_KEYS - RESPONSES_HANDLED - set(RESPONSES_IGNORED)


def test_the_sdk_request_types_are_what_this_test_reads() -> None:
    assert {"messages", "tools", "stream", "functions"} <= CHAT_KEYS
    assert {"input", "conversation", "prompt", "stream"} <= RESPONSES_KEYS


def test_every_handled_or_ignored_field_is_one_the_sdk_knows() -> None:
    # A name that no SDK type has is a typo here, or a field the SDK dropped.
    assert (CHAT_HANDLED | set(CHAT_IGNORED)) - CHAT_KEYS == set()
    # The Open Responses specification has the penalties, which openai's type lacks.
    open_responses = {"presence_penalty", "frequency_penalty"}
    assert (RESPONSES_HANDLED | set(RESPONSES_IGNORED)) - RESPONSES_KEYS == open_responses


@pytest.fixture
def client(iris_server: StartIris) -> typing.Iterator[OpenAI]:
    server = iris_server()
    with OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10) as c:
        yield c


def refused_param(call: Any) -> str:
    with pytest.raises(BadRequestError) as caught:
        call()
    body: Any = caught.value.body
    assert body["code"] == "unsupported_parameter"
    return body["param"]


@pytest.mark.parametrize("key", sorted(CHAT_REFUSED | {"temprature", "best_of"}))
def test_chat_refuses_a_field_it_would_ignore(
    client: OpenAI, upstream: FakeUpstream, key: str
) -> None:
    def call() -> Any:
        return client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "hi"}],
            extra_body={key: {"any": "value"}},
        )

    assert refused_param(call) == key
    assert not upstream.requests, "a refused request reached the model"


@pytest.mark.parametrize("key", sorted(RESPONSES_REFUSED | {"temprature"}))
def test_responses_refuses_a_field_it_would_ignore(
    client: OpenAI, upstream: FakeUpstream, key: str
) -> None:
    def call() -> Any:
        return client.responses.create(
            model="fake-model", input="hi", extra_body={key: {"any": "value"}}
        )

    assert refused_param(call) == key
    assert not upstream.requests


def test_ignored_fields_and_nulls_are_accepted(client: OpenAI, upstream: FakeUpstream) -> None:
    upstream.script(text("one"), text("two"))
    chat = client.chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "hi"}],
        prediction={"type": "content", "content": "one"},
        prompt_cache_retention="24h",
        modalities=["text"],
        store=False,
        extra_body={"audio": None},
    )
    assert chat.choices[0].message.content == "one"
    response = client.responses.create(
        model="fake-model",
        input="hi",
        include=["reasoning.encrypted_content"],
        stream_options={"include_obfuscation": False},
        extra_body={"prompt": None},
    )
    assert response.output_text == "two"


def test_chat_store_true_and_audio_modalities_are_refused(client: OpenAI) -> None:
    messages: Any = [{"role": "user", "content": "hi"}]
    assert (
        refused_param(
            lambda: client.chat.completions.create(
                model="fake-model", messages=messages, store=True
            )
        )
        == "store"
    )
    assert (
        refused_param(
            lambda: client.chat.completions.create(
                model="fake-model", messages=messages, modalities=["text", "audio"]
            )
        )
        == "modalities"
    )

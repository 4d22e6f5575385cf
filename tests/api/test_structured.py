"""Structured outputs and generation parameters, end to end: the official SDK's ``parse()``
against ``iris serve``'s API, the scripted upstream answering JSON only when it received the
response format — in both provider modes — and every parameter arriving upstream under the
provider's own name."""

from __future__ import annotations

from typing import Any

import pytest
from openai import BadRequestError, OpenAI
from pydantic import BaseModel

from tests.api.conftest import IrisServer, StartIris
from tests.fakes.scenarios import structured, text, tool_call
from tests.fakes.upstream import FakeUpstream

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "Weather in Paris?"}]
PROVIDERS = ["chat_completions", "responses"]


class Weather(BaseModel):
    city: str
    degrees: int


PARIS = {"city": "Paris", "degrees": 21}


def client_for(server: IrisServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10)


def received_format(upstream: FakeUpstream, provider: str) -> dict[str, Any]:
    """The response format the upstream received, in the flat (Responses) spelling."""
    body = upstream.wait_for_request().body
    if provider == "responses":
        return body["text"]["format"]
    fmt = body["response_format"]
    return {"type": fmt["type"], **fmt["json_schema"]}


def assert_weather_schema(fmt: dict[str, Any]) -> None:
    assert fmt["type"] == "json_schema"
    assert fmt["name"] == "Weather"
    assert fmt["strict"] is True
    assert set(fmt["schema"]["properties"]) == {"city", "degrees"}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("config_streams", [True, False], ids=["streaming-on", "streaming-off"])
def test_chat_completions_parse(
    iris_server: StartIris, upstream: FakeUpstream, provider: str, config_streams: bool
) -> None:
    server = iris_server(model={"provider": provider}, streaming={"enabled": config_streams})
    upstream.script(structured(PARIS))
    with client_for(server) as client:
        completion = client.chat.completions.parse(
            model="fake-model", messages=USER, response_format=Weather
        )
    assert completion.choices[0].message.parsed == Weather(city="Paris", degrees=21)
    assert_weather_schema(received_format(upstream, provider))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_responses_parse(iris_server: StartIris, upstream: FakeUpstream, provider: str) -> None:
    server = iris_server(model={"provider": provider}, streaming={"enabled": True})
    upstream.script(structured(PARIS))
    with client_for(server) as client:
        response = client.responses.parse(model="fake-model", input="Paris?", text_format=Weather)
    assert response.output_parsed == Weather(city="Paris", degrees=21)
    # The Response object says which format was applied.
    assert response.text is not None and response.text.format is not None
    assert response.text.format.type == "json_schema"
    assert_weather_schema(received_format(upstream, provider))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_streamed_parse(iris_server: StartIris, upstream: FakeUpstream, provider: str) -> None:
    server = iris_server(model={"provider": provider})
    upstream.script(structured(PARIS), structured(PARIS))
    with client_for(server) as client:
        with client.chat.completions.stream(
            model="fake-model", messages=USER, response_format=Weather
        ) as stream:
            completion = stream.get_final_completion()
        with client.responses.stream(
            model="fake-model", input="Paris?", text_format=Weather
        ) as events:
            response = events.get_final_response()
    assert completion.choices[0].message.parsed == Weather(city="Paris", degrees=21)
    assert response.output_parsed == Weather(city="Paris", degrees=21)


def test_json_object_mode(iris_server: StartIris, upstream: FakeUpstream) -> None:
    server = iris_server()
    upstream.script(structured({"ok": True}))
    with client_for(server) as client:
        completion = client.chat.completions.create(
            model="fake-model", messages=USER, response_format={"type": "json_object"}
        )
    assert completion.choices[0].message.content == '{"ok": true}'
    assert upstream.wait_for_request().body["response_format"] == {"type": "json_object"}


# -- every parameter reaches the provider under its own name --------------------------------

CHAT_PARAMS: dict[str, Any] = {
    "temperature": 0.2,
    "top_p": 0.9,
    "user": "u-1",
    "safety_identifier": "hash-1",
    "prompt_cache_key": "cache-1",
    "service_tier": "flex",
    "metadata": {"team": "a"},
    "reasoning_effort": "low",
    "verbosity": "low",
    "parallel_tool_calls": False,
}
TOOL = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


def ask_with_tool(server: IrisServer, upstream: FakeUpstream, **params: Any) -> dict[str, Any]:
    """A chat request naming its one tool in ``tool_choice``; the body the upstream got."""
    with client_for(server) as client:
        client.chat.completions.create(
            model="fake-model",
            messages=USER,
            tools=[TOOL],  # type: ignore[list-item]
            tool_choice={"type": "function", "function": {"name": "lookup"}},
            **params,
        )
    return upstream.wait_for_request().body


def test_chat_parameters_reach_a_chat_provider(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    upstream.script(tool_call("lookup", ["{}"]))
    extra = {
        "stop": ["END"],
        "seed": 7,
        "presence_penalty": 0.5,
        "frequency_penalty": -0.5,
        "logit_bias": {"50256": -100},
    }
    body = ask_with_tool(server, upstream, max_completion_tokens=50, **CHAT_PARAMS, **extra)
    for key, value in {**CHAT_PARAMS, **extra}.items():
        if key != "metadata":
            assert body[key] == value, key
    # OpenAI takes metadata only with store, and Iris keeps no chat completions upstream.
    assert "metadata" not in body and "store" not in body
    assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    # The client's spelling of the limit: reasoning models take only this one.
    assert body["max_completion_tokens"] == 50 and "max_tokens" not in body


def test_chat_parameters_reach_a_responses_provider_under_responses_names(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server(model={"provider": "responses"})
    upstream.script(tool_call("lookup", ["{}"]))
    body = ask_with_tool(server, upstream, max_tokens=50, **CHAT_PARAMS)
    moved = {"reasoning_effort", "verbosity"}
    for key, value in CHAT_PARAMS.items():
        if key not in moved:
            assert body[key] == value, key
    assert body["reasoning"] == {"effort": "low"}
    assert body["text"] == {"verbosity": "low"}
    assert body["tool_choice"] == {"type": "function", "name": "lookup"}
    assert body["max_output_tokens"] == 50


def test_responses_parameters_reach_a_chat_provider_under_chat_names(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    upstream.script(text("ok"))
    with client_for(server) as client:
        response = client.responses.create(
            model="fake-model",
            input="hi",
            temperature=0.3,
            reasoning={"effort": "high"},
            max_output_tokens=40,
            metadata={"k": "v"},
        )
    body = upstream.wait_for_request().body
    assert body["temperature"] == 0.3
    assert body["reasoning_effort"] == "high"
    assert body["max_tokens"] == 40
    assert "metadata" not in body  # OpenAI refuses it there without store
    # The response echoes what was applied, its metadata included (Iris stores it).
    assert response.metadata == {"k": "v"}
    assert response.temperature == 0.3
    assert response.reasoning is not None and response.reasoning.effort == "high"


@pytest.mark.parametrize(
    ("provider", "param", "value", "named"),
    [
        ("responses", "seed", 7, "seed"),
        ("responses", "logit_bias", {"1": 2}, "logit_bias"),
        ("responses", "stop", "END", "stop"),
        ("chat_completions", "n", 2, "n"),
        ("chat_completions", "logprobs", True, "logprobs"),
    ],
)
def test_a_parameter_the_provider_cannot_honour_is_a_400_naming_it(
    iris_server: StartIris,
    upstream: FakeUpstream,
    provider: str,
    param: str,
    value: Any,
    named: str,
) -> None:
    server = iris_server(model={"provider": provider})
    with client_for(server) as client, pytest.raises(BadRequestError) as caught:
        client.chat.completions.create(
            model="fake-model",
            messages=USER,
            **{param: value},  # type: ignore[arg-type]
        )
    assert caught.value.body["param"] == named  # type: ignore[index]
    assert named in caught.value.message
    assert not upstream.requests  # refused before any work


def test_reasoning_summary_needs_a_responses_provider(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    with client_for(server) as client, pytest.raises(BadRequestError) as caught:
        client.responses.create(
            model="fake-model", input="hi", reasoning={"effort": "low", "summary": "auto"}
        )
    assert caught.value.body["param"] == "reasoning.summary"  # type: ignore[index]
    assert "chat_completions" in caught.value.message

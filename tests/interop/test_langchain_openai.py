"""langchain-openai against Iris on the first-run config: invoke, stream, tools, structured
output, and the Responses API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from tests.api.conftest import IrisServer
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.interop.conftest import upstream_bodies

pytestmark = pytest.mark.timeout(30)


class Weather(BaseModel):
    city: str
    celsius: int


@pytest.fixture(autouse=True)
def no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    # LangSmith tracing would send every run to its servers; this suite stays on the loopback.
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}, 21 °C"


def chat_model(iris: IrisServer, **options: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="fake-model",
        base_url=iris.base_url,
        api_key="unused",  # type: ignore[arg-type]
        max_retries=0,
        timeout=10,
        **options,
    )


@pytest.fixture
def llm(iris: IrisServer) -> Iterator[ChatOpenAI]:
    yield chat_model(iris)


def test_invoke_returns_the_answer(upstream: FakeUpstream, llm: ChatOpenAI) -> None:
    upstream.script(text("Hel", "lo"))
    message = llm.invoke("hi")
    assert isinstance(message, AIMessage)
    assert message.text == "Hello"


def test_stream_yields_the_deltas(upstream: FakeUpstream, llm: ChatOpenAI) -> None:
    upstream.script(text("Hel", "lo"))
    pieces = [chunk.text for chunk in llm.stream("hi")]
    assert "".join(pieces) == "Hello"
    assert [p for p in pieces if p] == ["Hel", "lo"]


def test_bind_tools_round_trip(upstream: FakeUpstream, llm: ChatOpenAI) -> None:
    upstream.script(
        tool_call("get_weather", ['{"city":', '"Paris"}'], call_id="call_w"),
        text("Sunny, 21 °C."),
    )
    with_tools = llm.bind_tools([get_weather])
    history: list[BaseMessage] = [HumanMessage("Weather in Paris?")]
    asked = with_tools.invoke(history)
    assert isinstance(asked, AIMessage)
    assert [(c["name"], c["args"], c["id"]) for c in asked.tool_calls] == [
        ("get_weather", {"city": "Paris"}, "call_w")
    ]
    history += [
        asked,
        ToolMessage(get_weather.invoke(asked.tool_calls[0]["args"]), tool_call_id="call_w"),
    ]
    answer = with_tools.invoke(history)
    assert answer.text == "Sunny, 21 °C."
    sent = upstream_bodies(upstream)
    assert sent[0]["tools"][0]["function"]["name"] == "get_weather"
    assert sent[1]["messages"][-1]["tool_call_id"] == "call_w"


def test_with_structured_output_reaches_the_model_and_parses(
    upstream: FakeUpstream, llm: ChatOpenAI
) -> None:
    upstream.script(text('{"city": "Paris", "celsius": 21}'))
    weather = llm.with_structured_output(Weather).invoke("Weather in Paris as JSON")
    assert weather == Weather(city="Paris", celsius=21)
    sent = upstream_bodies(upstream)[0]["response_format"]
    assert sent["type"] == "json_schema"
    assert set(sent["json_schema"]["schema"]["properties"]) == {"city", "celsius"}


def test_responses_api_invoke_stream_and_tools(upstream: FakeUpstream, iris: IrisServer) -> None:
    upstream.script(
        text("Hel", "lo"),
        text("Hel", "lo"),
        tool_call("get_weather", ['{"city":', '"Paris"}'], call_id="call_w"),
        text("Sunny, 21 °C."),
    )
    llm = chat_model(iris, use_responses_api=True)
    assert llm.invoke("hi").text == "Hello"
    assert "".join(chunk.text for chunk in llm.stream("hi")) == "Hello"
    with_tools = llm.bind_tools([get_weather])
    history: list[BaseMessage] = [HumanMessage("Weather in Paris?")]
    asked = with_tools.invoke(history)
    assert isinstance(asked, AIMessage)
    assert [(c["name"], c["args"]) for c in asked.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    call_id = asked.tool_calls[0]["id"]
    assert call_id is not None
    history += [asked, ToolMessage("sunny in Paris, 21 °C", tool_call_id=call_id)]
    assert with_tools.invoke(history).text == "Sunny, 21 °C."
    assert upstream_bodies(upstream)[3]["messages"][-1]["tool_call_id"] == "call_w"


def test_stream_with_tools_shows_the_call_before_the_model_finished_it(
    upstream: FakeUpstream, iris: IrisServer
) -> None:
    upstream.script(
        tool_call("get_weather", ['{"city":', '"Paris"}'], call_id="call_w", gate_after=1)
    )
    model = chat_model(iris).bind_tools([get_weather])
    chunks: list[Any] = []
    released = False
    for chunk in model.stream("Weather in Paris?"):
        chunks.append(chunk)
        if not released and chunk.tool_call_chunks and chunk.tool_call_chunks[0].get("args"):
            # The upstream holds the rest of the call until this release.
            assert not upstream.finished.is_set(), "the call waited for the model to finish"
            upstream.release()
            released = True
    assert released
    message = chunks[0]
    for chunk in chunks[1:]:
        message = message + chunk
    assert message.tool_calls == [
        {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_w", "type": "tool_call"}
    ]

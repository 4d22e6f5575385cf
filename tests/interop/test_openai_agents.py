"""openai-agents against Iris on the first-run config: ``Runner.run`` and ``Runner.run_streamed``
with both model classes and a function tool that really runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from agents import (
    Agent,
    Model,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tests.api.conftest import IrisServer
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.interop.conftest import StartIris, upstream_bodies

pytestmark = pytest.mark.timeout(30)

# Tracing would export spans to OpenAI's servers; this suite stays on the loopback.
set_tracing_disabled(True)

MODELS: dict[str, Callable[[AsyncOpenAI], Model]] = {
    "responses": lambda client: OpenAIResponsesModel("fake-model", client),
    "chat": lambda client: OpenAIChatCompletionsModel("fake-model", client),
}


@pytest.fixture
async def client(iris: IrisServer) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(
        base_url=iris.base_url, api_key="unused", max_retries=0, timeout=10
    ) as c:
        yield c


def weather_agent(model: Model, cities: list[str]) -> Agent:
    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        cities.append(city)
        return f"sunny in {city}, 21 °C"

    return Agent(name="weather", instructions="Answer briefly.", model=model, tools=[get_weather])


def script_tool_then_answer(upstream: FakeUpstream) -> None:
    upstream.script(
        tool_call("get_weather", ['{"city":', '"Paris"}'], call_id="call_w"),
        text("Sunny, ", "21 °C."),
    )


def assert_tool_output_reached_the_model(upstream: FakeUpstream) -> None:
    bodies = upstream_bodies(upstream)
    assert len(bodies) == 2
    last = bodies[1]["messages"][-1]
    assert last["role"] == "tool" and last["tool_call_id"] == "call_w"
    assert "sunny in Paris" in last["content"]


@pytest.mark.parametrize("kind", MODELS)
async def test_runner_run_calls_the_tool_and_answers(
    upstream: FakeUpstream, client: AsyncOpenAI, kind: str
) -> None:
    script_tool_then_answer(upstream)
    cities: list[str] = []
    result = await Runner.run(weather_agent(MODELS[kind](client), cities), "Weather in Paris?")
    assert cities == ["Paris"]
    assert result.final_output == "Sunny, 21 °C."
    assert_tool_output_reached_the_model(upstream)


@pytest.mark.parametrize("kind", MODELS)
async def test_runner_run_streamed_streams_text_after_the_tool(
    upstream: FakeUpstream, client: AsyncOpenAI, kind: str
) -> None:
    script_tool_then_answer(upstream)
    cities: list[str] = []
    result = Runner.run_streamed(weather_agent(MODELS[kind](client), cities), "Weather in Paris?")
    deltas: list[str] = []
    tool_outputs: list[str] = []
    async for event in result.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            deltas.append(event.data.delta)
        elif event.type == "run_item_stream_event" and event.name == "tool_output":
            tool_outputs.append(str(getattr(event.item, "output", "")))
    assert cities == ["Paris"]
    assert tool_outputs == ["sunny in Paris, 21 °C"]
    assert deltas == ["Sunny, ", "21 °C."]
    assert result.final_output == "Sunny, 21 °C."
    assert_tool_output_reached_the_model(upstream)


async def test_runner_replays_a_reasoning_item_with_the_tool_output(
    upstream: FakeUpstream, client: AsyncOpenAI
) -> None:
    # The Responses model sends the whole first turn back, its reasoning item included.
    upstream.script(
        tool_call(
            "get_weather", ['{"city":', '"Paris"}'], call_id="call_w", reasoning=["Need data."]
        ),
        text("Sunny, ", "21 °C."),
    )
    cities: list[str] = []
    agent = weather_agent(MODELS["responses"](client), cities)
    result = await Runner.run(agent, "Weather in Paris?")
    assert cities == ["Paris"]
    assert result.final_output == "Sunny, 21 °C."
    assert any(item.type == "reasoning_item" for item in result.new_items)
    assert_tool_output_reached_the_model(upstream)


def contents(upstream: FakeUpstream, n: int) -> list[object]:
    return [m.get("content") for m in upstream_bodies(upstream)[n]["messages"]]


async def test_an_openai_conversations_session_remembers_across_runs(
    upstream: FakeUpstream, client: AsyncOpenAI
) -> None:
    from agents.memory import OpenAIConversationsSession

    upstream.script(text("Hi Ada."), text("You are Ada."))
    agent = Agent(name="memory", model=OpenAIResponsesModel("fake-model", client))
    session = OpenAIConversationsSession(openai_client=client)
    first = await Runner.run(agent, "I am Ada", session=session)
    assert first.final_output == "Hi Ada."
    second = await Runner.run(agent, "Who am I?", session=session)
    assert second.final_output == "You are Ada."
    assert contents(upstream, 1)[-3:] == ["I am Ada", "Hi Ada.", "Who am I?"]
    kept = await session.get_items()
    assert len(kept) == 4
    await session.clear_session()


async def test_runner_with_a_conversation_id_continues_it_server_side(
    upstream: FakeUpstream, client: AsyncOpenAI
) -> None:
    upstream.script(text("Hi Ada."), text("You are Ada."))
    agent = Agent(name="memory", model=OpenAIResponsesModel("fake-model", client))
    conversation = await client.conversations.create()
    await Runner.run(agent, "I am Ada", conversation_id=conversation.id)
    second = await Runner.run(agent, "Who am I?", conversation_id=conversation.id)
    assert second.final_output == "You are Ada."
    # The second run sends its new input; Iris reads the rest from the conversation.
    assert contents(upstream, 1)[-3:] == ["I am Ada", "Hi Ada.", "Who am I?"]
    assert len(upstream.requests) == 2
    items = await client.conversations.items.list(conversation.id, order="asc")
    assert len(items.data) == 4


async def test_run_streamed_shows_a_tool_call_before_the_model_finished_it(
    upstream: FakeUpstream, client: AsyncOpenAI
) -> None:
    upstream.script(
        tool_call("get_weather", ['{"city":', '"Paris"}'], call_id="call_w", gate_after=1),
        text("Sunny, ", "21 °C."),
    )
    cities: list[str] = []
    result = Runner.run_streamed(weather_agent(MODELS["responses"](client), cities), "Weather?")
    fragments: list[str] = []
    async for event in result.stream_events():
        data = event.data if event.type == "raw_response_event" else None
        if data is not None and data.type == "response.function_call_arguments.delta":
            if not fragments:
                assert not upstream.finished.is_set(), "the call waited for the model to finish"
                upstream.release()
            fragments.append(data.delta)
    assert fragments == ['{"city":', '"Paris"}']
    assert cities == ["Paris"]
    assert result.final_output == "Sunny, 21 °C."


async def test_an_mcp_call_item_reads_as_a_hosted_tool_call_and_replays_as_input(
    upstream: FakeUpstream, start_iris: StartIris
) -> None:
    """openai-agents sends ``tools: []`` (so Iris's own tools stay off for it); a tool the
    model calls anyway is refused, and the refusal is an ``mcp_call`` item like any tool run
    of the agent: openai-agents reads it as a hosted MCP call, and a second run that sends the
    first's items back as input works."""
    server = start_iris(platforms={"api_server": {"api_key": "sk-agents"}})
    upstream.script(
        tool_call("read_file", ['{"path": "notes.txt"}'], content="Reading."),
        text("I cannot read it."),
        text("Still cannot."),
    )
    async with AsyncOpenAI(base_url=server.base_url, api_key="sk-agents", max_retries=0) as c:
        agent = Agent(name="iris", model=OpenAIResponsesModel("iris-agent", c))
        result = Runner.run_streamed(agent, "What do my notes say?")
        raw: list[str] = []
        async for event in result.stream_events():
            if event.type == "raw_response_event":
                raw.append(event.data.type)
        assert result.final_output == "I cannot read it."
        assert "response.mcp_call.failed" in raw
        calls = [item.raw_item for item in result.new_items if item.type == "tool_call_item"]
        seen = [(call.type, call.name, call.server_label, call.status) for call in calls]  # type: ignore[union-attr]
        assert seen == [("mcp_call", "read_file", "iris", "failed")]
        again = await Runner.run(agent, [*result.to_input_list(), user("And so?")])
    assert again.final_output == "Still cannot."
    sent = upstream_bodies(upstream)[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == [
        "What do my notes say?",
        "And so?",
    ]


def user(content: str) -> Any:
    return {"role": "user", "content": content}

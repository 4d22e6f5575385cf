"""Assist's conversation agent through ``iris-voice``: Home Assistant's ``llama_cpp`` integration,
replayed from ``recordings/home_assistant_llama_cpp.json`` with the official openai SDK, against
Iris's API on a real socket, with the model Home Assistant's user picks for speech.

What a person at the speaker hears: plain sentences (the model's Markdown never read aloud), the
light switched through Home Assistant's own tools (client tool calls, streamed as they form),
never an Iris tool offered; a slow answer acknowledged in one sentence, and the answer itself
later, on the satellite when one is configured, else as a notification through the Home
Assistant platform; and a tool call the model makes after that response ended is carried out
through Home Assistant's intent API.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from openai import AsyncOpenAI, BadRequestError, OpenAI, RateLimitError

from iris.surfaces.api.voice import ACK, ACK_HERE, INSTRUCTIONS
from iris.surfaces.chat.platforms.homeassistant import notification_id
from tests.api.conftest import IrisServer
from tests.fakes.homeassistant import HomeAssistant
from tests.fakes.scenarios import Received, Scenario, structured
from tests.fakes.upstream import FakeUpstream, gated, responder, text, tool_call, tool_calls
from tests.interop.conftest import StartIris
from tests.interop.home_assistant_steps import KEY, ask, offered, run_steps

pytestmark = pytest.mark.timeout(30)

VOICE = "iris-voice"
MARKDOWN = ("**Owls** can", " turn their heads", " about `270` degrees:\n\n", "- left\n- right")


def answers(request: Received) -> Scenario:
    """The model's side, as in the plain test, but it writes Markdown, as models do."""
    body = request.body
    messages = body["messages"]
    if body.get("response_format"):
        return structured({"summary": "The *kitchen* light is on.", "lights_on": [1]})
    if messages[-1]["role"] == "tool":
        return text("**Done!** The ", "kitchen light ", "is `on`.")
    if "kitchen" in str(messages[-1]["content"]):
        return tool_call("HassTurnOn", ['{"name":', '"kitchen light"}'], call_id="call_up_1")
    if body.get("max_tokens") == 3:
        return text("**Paris**")
    return text(*MARKDOWN)


def test_the_llama_cpp_sequence_on_iris_voice_is_spoken_text_and_its_own_tools(
    start_iris: StartIris, upstream: FakeUpstream
) -> None:
    server = start_iris(platforms={"api_server": {"api_key": KEY}})
    upstream.default = responder(answers)
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as client:
        seen = run_steps(client, VOICE)
    assert VOICE in seen["list_models"]
    # The probes pass: setup succeeds on the voice model.
    assert seen["probe"][0] == "Paris" and seen["probe_streaming"][0] == "Paris"
    content, calls, finish = seen["control"]
    assert finish == "tool_calls" and calls[0].function.name == "HassTurnOn"
    assert len(calls) > 1, "the call streamed in fragments, as it formed"
    arguments = "".join(call.function.arguments or "" for call in calls)
    assert json.loads(arguments) == {"name": "kitchen light"}
    assert seen["control_result"][0] == "Done! The kitchen light is on."
    spoken = seen["no_control"][0]
    assert spoken == "Owls can turn their heads about 270 degrees:\n\nleft\nright"
    # Structured output is data: passed through as the model wrote it.
    assert json.loads(seen["structured"][0])["summary"] == "The *kitchen* light is on."
    for request in upstream.requests:
        assert "terminal" not in offered(request) and "read_file" not in offered(request)
        assert INSTRUCTIONS in str(request.body["messages"])
    control = upstream.requests[2]
    assert offered(control) == ["HassTurnOn", "HassTurnOff", "GetLiveContext"]
    assert control.body["user"] == "01K2M3N4P5Q6R7S8T9V0W1X2Y3"
    assert control.body["model"] == "fake-model"  # the configured model answers for speech


def test_the_voice_model_never_gets_iris_tools_even_when_every_request_would(
    start_iris: StartIris, upstream: FakeUpstream
) -> None:
    server = start_iris(platforms={"api_server": {"api_key": KEY, "agent_tools": "always"}})
    upstream.script(text("Hello."))
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as client:
        answer = client.chat.completions.create(
            model=VOICE, messages=[{"role": "user", "content": "hi"}]
        )
    assert answer.choices[0].message.content == "Hello."
    assert offered(upstream.requests[0]) == []


@pytest.fixture
async def ha() -> AsyncIterator[HomeAssistant]:
    async with HomeAssistant(states={"light.kitchen": "off"}) as fake:
        yield fake


async def test_a_slow_answer_is_acknowledged_then_arrives_as_a_notification(
    start_iris: StartIris, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    house: dict[str, Any] = {"enabled": True, "url": ha.url, "token": ha.token}
    house["voice"] = {"ack_after": 0.3}
    platforms = {"api_server": {"api_key": KEY}, "homeassistant": house}
    # Started off the loop: its start connects to the stand-in, which this loop serves.
    server = await asyncio.to_thread(start_iris, platforms=platforms)
    await ha.wait_until(lambda: ha.connections)
    upstream.script(gated("**The forecast**", " says rain", " tomorrow.", after=0))
    async with AsyncOpenAI(base_url=server.base_url, api_key=KEY, max_retries=0) as client:
        stream = await client.chat.completions.create(
            model=VOICE,
            messages=[{"role": "user", "content": "Will it rain tomorrow?"}],
            stream=True,
        )
        said = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert said == ACK  # one short sentence, and the response ended
    assert ha.notifications == []
    upstream.release()  # the answer comes after all
    await ha.wait_until(lambda: ha.notifications)
    [note] = ha.notifications
    assert note.data["notification_id"] == notification_id("voice")
    assert note.message == "The forecast says rain tomorrow."


def test_the_responses_api_refuses_the_voice_model_with_a_code(
    start_iris: StartIris, upstream: FakeUpstream
) -> None:
    server = start_iris(platforms={"api_server": {"api_key": KEY}})
    client = OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10)
    with client, pytest.raises(BadRequestError) as refused:
        client.responses.create(model=VOICE, input="hi")
    assert getattr(refused.value, "status_code", None) == 400
    assert refused.value.code == "model_not_supported"
    assert upstream.requests == []


def test_a_tool_call_comes_back_whole_to_a_request_that_does_not_stream(
    start_iris: StartIris, upstream: FakeUpstream
) -> None:
    server = start_iris(platforms={"api_server": {"api_key": KEY}})
    upstream.script(tool_call("HassTurnOff", ['{"name": ', '"hall light"}'], call_id="call_h"))
    tool = {"type": "function", "function": {"name": "HassTurnOff", "parameters": {}}}
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as client:
        answer = client.chat.completions.create(
            model=VOICE,
            messages=[{"role": "user", "content": "Hall light off"}],
            tools=[tool],  # pyright: ignore[reportArgumentType]
            stream=False,
        )
    [call] = answer.choices[0].message.tool_calls or []
    assert answer.choices[0].finish_reason == "tool_calls"
    assert call.id == "call_h" and call.function.name == "HassTurnOff"  # pyright: ignore[reportAttributeAccessIssue]
    assert json.loads(call.function.arguments) == {"name": "hall light"}  # pyright: ignore[reportAttributeAccessIssue]


async def voice_server(
    start_iris: StartIris, ha: HomeAssistant, **voice: Any
) -> tuple[IrisServer, AsyncOpenAI]:
    """``iris serve`` with the Home Assistant platform on the stand-in; a client of its API."""
    house: dict[str, Any] = {"enabled": True, "url": ha.url, "token": ha.token}
    house["voice"] = {"ack_after": 0.3, **voice}
    platforms = {"api_server": {"api_key": KEY}, "homeassistant": house}
    # Started off the loop: its start connects to the stand-in, which this loop serves.
    server = await asyncio.to_thread(start_iris, platforms=platforms)
    await ha.wait_until(lambda: ha.connections)
    return server, AsyncOpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)


async def test_a_late_answer_is_spoken_on_the_configured_satellite(
    start_iris: StartIris, upstream: FakeUpstream
) -> None:
    async with HomeAssistant(states={"assist_satellite.kitchen": "idle"}) as ha:
        server, client = await voice_server(start_iris, ha, satellite="assist_satellite.kitchen")
        upstream.script(gated("**The forecast**", " says rain", " tomorrow.", after=0))
        async with client:
            said = await ask(client, "Will it rain tomorrow?")
        assert said == ACK_HERE  # it says where the answer will come
        upstream.release()
        await ha.wait_until(lambda: ha.announcements)
        assert ha.announcements == [
            ("assist_satellite.kitchen", "The forecast says rain tomorrow.")
        ]
        [call] = ha.sent("call_service")
        assert call["domain"] == "assist_satellite" and call["service"] == "announce"
        assert call["service_data"] == {"message": "The forecast says rain tomorrow."}
        assert ha.notifications == []
        del server


async def test_an_announcement_that_fails_comes_as_a_notification(
    start_iris: StartIris, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    # The satellite is not in the house (renamed, removed): Home Assistant says not_found.
    _, client = await voice_server(start_iris, ha, satellite="assist_satellite.gone")
    upstream.script(gated("It will rain.", after=0))
    async with client:
        assert await ask(client, "Will it rain tomorrow?") == ACK_HERE
    upstream.release()
    await ha.wait_until(lambda: ha.notifications)
    assert [e["error"]["code"] for e in ha.errors] == ["not_found"]
    [note] = ha.notifications
    assert note.message == "It will rain." and note.data["notification_id"] == "iris_voice"
    assert ha.announcements == []


def turns_on(request: Received) -> Scenario:
    """The model: switches the light (slowly: past the acknowledgement), then says so."""
    messages = request.body["messages"]
    if messages[-1]["role"] == "tool":
        return text("**Done**, the kitchen light is on.")
    thinking = ["The user wants the light on."]  # held back: the call comes after the ack
    arguments = ['{"name":', ' "kitchen light"}']
    return tool_call("HassTurnOn", arguments, "call_k", reasoning=thinking, gate_after=0)


async def test_a_tool_call_after_the_acknowledgement_is_carried_out_through_home_assistant(
    start_iris: StartIris, upstream: FakeUpstream
) -> None:
    async with HomeAssistant(states={"light.kitchen_light": "off"}) as ha:
        _, client = await voice_server(start_iris, ha)
        upstream.default = responder(turns_on)
        async with client:
            assert await ask(client, "Turn on the kitchen light") == ACK
        upstream.release()  # the model calls HassTurnOn after the response has ended
        await ha.wait_until(lambda: ha.notifications)
        # Home Assistant handled the intent, as Assist's own tool call would have.
        assert ha.intents == [
            {"name": "HassTurnOn", "data": {"name": "kitchen light"}, "assistant": "conversation"}
        ]
        assert ha.states["light.kitchen_light"] == "on"
        # Its intent response went back to the model as the tool's result...
        again = upstream.requests[1].body
        assert again["messages"][-2]["tool_calls"][0]["id"] == "call_k"
        result = again["messages"][-1]
        assert result["role"] == "tool" and result["tool_call_id"] == "call_k"
        response = json.loads(result["content"])
        assert response["response_type"] == "action_done" and "language" not in response
        assert offered(upstream.requests[1]) == ["HassTurnOn", "HassTurnOff", "GetLiveContext"]
        # ... and the answer the model wrote then is what the house is told.
        [note] = ha.notifications
        assert note.message == "Done, the kitchen light is on."


def calls_what_is_no_intent(request: Received) -> Scenario:
    messages = request.body["messages"]
    if messages[-1]["role"] == "tool":
        return text("I could not check that.")
    return tool_calls(
        [("GetLiveContext", ["{}"]), ("HassVacuumStart", ['{"name": "robot"}'])],
        reasoning=["Look first."],
        gate_after=0,
    )


async def test_a_tool_that_is_not_an_intent_gets_an_error_result_and_the_turn_answers(
    start_iris: StartIris, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    _, client = await voice_server(start_iris, ha)
    upstream.default = responder(calls_what_is_no_intent)
    async with client:
        assert await ask(client, "Is the vacuum running?") == ACK
    upstream.release()
    await ha.wait_until(lambda: ha.notifications)
    live, vacuum = [m["content"] for m in upstream.requests[1].body["messages"][-2:]]
    assert live.startswith("error: GetLiveContext is not an intent")
    # Not an intent Home Assistant has: its 500, said as an error the model can read.
    assert vacuum.startswith("error: Home Assistant did not handle HassVacuumStart")
    assert [i["name"] for i in ha.intents] == ["HassVacuumStart"]  # GetLiveContext: not sent
    assert ha.notifications[0].message == "I could not check that."


async def test_a_voice_turn_that_goes_on_after_its_reply_keeps_its_turn_slot(
    start_iris: StartIris, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    """``server.max_turns`` counts the turn, not its response: while an acknowledged voice turn
    is still working, a request over the limit is told the server is busy; once its answer
    was announced the slot is free again."""
    house: dict[str, Any] = {"enabled": True, "url": ha.url, "token": ha.token}
    house["voice"] = {"ack_after": 0.3}
    platforms = {"api_server": {"api_key": KEY}, "homeassistant": house}
    server = await asyncio.to_thread(start_iris, platforms=platforms, server={"max_turns": 1})
    await ha.wait_until(lambda: ha.connections)
    upstream.script(gated("It will rain.", after=0), text("Hello."))
    async with AsyncOpenAI(base_url=server.base_url, api_key=KEY, max_retries=0) as client:
        assert await ask(client, "Will it rain tomorrow?") == ACK
        with pytest.raises(RateLimitError) as busy:
            await client.chat.completions.create(
                model=VOICE, messages=[{"role": "user", "content": "hi"}]
            )
        assert busy.value.code == "too_many_turns"
        upstream.release()
        await ha.wait_until(lambda: ha.notifications)
        async with asyncio.timeout(10):  # the slot comes back as the turn's task ends
            while True:
                try:
                    said = await client.chat.completions.create(
                        model=VOICE, messages=[{"role": "user", "content": "hi"}]
                    )
                    break
                except RateLimitError:
                    await asyncio.sleep(0.05)
        assert said.choices[0].message.content == "Hello."

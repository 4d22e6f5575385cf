"""Home Assistant's ``llama_cpp`` integration against Iris, replayed from
``recordings/home_assistant_llama_cpp.json`` (built from its source: see the recording's
``source``) with the official openai SDK it uses: the model list, the two probes (without and
with streaming, a test tool, ``max_tokens: 3``), a turn with its Assist tools and the turn that
sends the tool's result, a turn with control off, and a structured-output request.

What its user would see: setup succeeds and picks the provider's model (listed first), the
light switches on, and none of these requests is handed Iris's own tools (``iris-agent`` is
only for a client that asks for the agent)."""

from __future__ import annotations

import json

import pytest
from openai import OpenAI

from tests.fakes.scenarios import Received, Scenario, structured
from tests.fakes.upstream import FakeUpstream, responder, text, tool_call
from tests.interop.conftest import StartIris
from tests.interop.home_assistant_steps import KEY, offered, run_steps

pytestmark = pytest.mark.timeout(30)

# homeassistant/components/llama_cpp/const.py: RECOMMENDED_CHAT_MODELS
RECOMMENDED = ("gpt-3.5-turbo", "gpt-4", "local-model")


def recommended_model(models: list[str]) -> str:
    """The integration's own choice (api.py ``recommended_model``)."""
    return next((m for m in RECOMMENDED if m in models), models[0] if models else RECOMMENDED[0])


def answers(request: Received) -> Scenario:
    """The model's side: a word for the probes, HassTurnOn for the command, a sentence once the
    tool answered, JSON for the structured request, a fact otherwise."""
    body = request.body
    messages = body["messages"]
    if body.get("response_format"):
        return structured({"summary": "The kitchen light is on.", "lights_on": 1})
    if messages[-1]["role"] == "tool":
        return text("The kitchen light is on.")
    if "kitchen" in str(messages[-1]["content"]):
        return tool_call("HassTurnOn", ['{"name":', '"kitchen light"}'], call_id="call_up_1")
    if body.get("max_tokens") == 3:
        return text("Paris")
    return text("Owls cannot move their eyes.")


def test_setup_probes_control_and_structured_output_through_iris(
    start_iris: StartIris, upstream: FakeUpstream
) -> None:
    server = start_iris(platforms={"api_server": {"api_key": KEY}})
    upstream.default = responder(answers)
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as client:
        listed = [m.id for m in client.models.list()]
        model = recommended_model(listed)
        seen = run_steps(client, model)
    # Setup lists the models and picks the provider's (the first), not the agent.
    assert seen["list_models"] == ["fake-model", "iris-agent", "iris-voice"]
    assert model == "fake-model"
    assert seen["probe"][0] == "Paris" and seen["probe_streaming"][0] == "Paris"
    content, calls, finish = seen["control"]
    assert finish == "tool_calls" and calls[0].function.name == "HassTurnOn"
    arguments = "".join(call.function.arguments or "" for call in calls)
    assert json.loads(arguments) == {"name": "kitchen light"}
    assert seen["control_result"][0] == "The kitchen light is on."
    assert seen["no_control"][0] == "Owls cannot move their eyes."
    assert json.loads(seen["structured"][0]) == {
        "summary": "The kitchen light is on.",
        "lights_on": 1,
    }
    assert len(upstream.requests) == 6  # every step reached the model once
    # Its own tools went to the model; Iris's never did.
    for request in upstream.requests:
        assert "terminal" not in offered(request) and "read_file" not in offered(request)
    control = upstream.requests[2]
    assert offered(control) == ["HassTurnOn", "HassTurnOff", "GetLiveContext"]
    # The limit, sampling and the conversation id reached the model as sent.
    assert control.body["max_tokens"] == 3000 and control.body["temperature"] == 0.7
    assert control.body["top_p"] == 1.0 and control.body["user"] == "01K2M3N4P5Q6R7S8T9V0W1X2Y3"
    assert upstream.requests[0].body["max_tokens"] == 3
    structured_request = upstream.requests[5]
    assert structured_request.body["response_format"]["json_schema"]["name"] == "Summary"


def test_even_the_agent_model_gets_no_agent_tools_for_structured_output(
    start_iris: StartIris, upstream: FakeUpstream
) -> None:
    """A user who picked iris-agent: the control-off turn is the agent's; structured output is
    data, never a turn with Iris's tools."""
    server = start_iris(platforms={"api_server": {"api_key": KEY}})
    upstream.default = responder(answers)
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as client:
        run_steps(client, "iris-agent")
    no_control, structured_request = upstream.requests[4], upstream.requests[5]
    assert "terminal" in offered(no_control)
    assert offered(structured_request) == []
    # The probes and the control turns carried HA's tools: Iris's stay off there too.
    assert offered(upstream.requests[0]) == ["test_function"]

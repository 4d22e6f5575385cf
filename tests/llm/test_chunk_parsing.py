"""The providers' stream parsing against recorded SSE bodies, with no network.

Each body in ``recordings/`` is what a provider sends on the wire (Chat Completions chunks,
Responses events). It is served by an ``httpx`` mock transport under the official SDK client
the provider uses, so the real path runs: the SDK's request and response handling, the
provider's parser, and the agent's ``RoundBuilder`` (think-tag scrubbing) where a test says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from iris.agent.round import RoundBuilder
from iris.config import ModelEndpoint
from iris.errors import ProviderBadResponse, ProviderConnectionError, ProviderError
from iris.events import ReasoningDelta, TextDelta
from iris.llm.chat_completions import ChatCompletionsProvider
from iris.llm.provider import (
    ProviderRequest,
    RawDelta,
    RawReasoning,
    RawText,
    RawToolCall,
    RawUsage,
)
from iris.llm.responses_api import ResponsesProvider

try:  # the transport library of the installed SDK: httpx2 for newer ones, httpx before
    import httpx2 as http
except ImportError:  # pragma: no cover - depends on the installed SDK
    import httpx as http

RECORDINGS = Path(__file__).parent / "recordings"
REQUEST = ProviderRequest("gpt-4.1-mini", [{"role": "user", "content": "hi"}])

Provider = ChatCompletionsProvider | ResponsesProvider


def replaying(
    kind: type[Provider], recording: str, *, content_type: str = "text/event-stream"
) -> tuple[Provider, list[Any]]:
    """A provider whose upstream answers every request with the recorded body."""
    body = (RECORDINGS / recording).read_bytes()
    requests: list[Any] = []

    def answer(request: Any) -> Any:
        requests.append(request)
        return http.Response(200, headers={"content-type": content_type}, content=body)

    client = openai.AsyncOpenAI(
        base_url="http://upstream.test/v1",
        api_key="sk-test",
        max_retries=0,
        http_client=http.AsyncClient(transport=http.MockTransport(answer)),
    )
    return kind(ModelEndpoint(name="recorded"), client=client), requests


async def deltas(kind: type[Provider], recording: str, **options: str) -> list[RawDelta]:
    provider, _ = replaying(kind, recording, **options)
    try:
        return [raw async for raw in provider.stream(REQUEST)]
    finally:
        await provider.aclose()


async def failure(kind: type[Provider], recording: str, **options: str) -> ProviderError:
    with pytest.raises(ProviderError) as failed:
        await deltas(kind, recording, **options)
    return failed.value


def texts(raws: list[RawDelta]) -> str:
    return "".join(raw.text for raw in raws if isinstance(raw, RawText))


def calls(raws: list[RawDelta]) -> dict[int, tuple[str, str, str]]:
    """Each call's (id, name, arguments) as the agent's round assembles them."""
    round_ = RoundBuilder()
    for raw in raws:
        round_.feed(raw)
    return {i: (c.id, c.name, c.arguments) for i, c in round_.calls.items()}


# -- Chat Completions ---------------------------------------------------------------------------


async def test_chat_text_arrives_in_order_with_the_usage_chunk() -> None:
    raws = await deltas(ChatCompletionsProvider, "chat/text.sse")

    assert texts(raws) == "Hello, world! Ünïcode ✓ 👋🏽"
    assert [raw for raw in raws if isinstance(raw, RawUsage)] == [RawUsage(12, 7)]


async def test_chat_asks_for_the_usage_chunk() -> None:
    provider, requests = replaying(ChatCompletionsProvider, "chat/text.sse")
    [_ async for _ in provider.stream(REQUEST)]
    await provider.aclose()

    [request] = requests
    assert request.url.path == "/v1/chat/completions"
    assert b'"stream_options": {"include_usage": true}' in request.content


async def test_chat_tool_calls_split_across_chunks_are_reassembled() -> None:
    raws = await deltas(ChatCompletionsProvider, "chat/tool_calls.sse")

    assert calls(raws) == {
        0: ("call_Wq9", "get_weather", '{"city": "Paris"}'),
        1: ("call_Zr4", "get_time", '{"zone": "Europe/Paris"}'),
    }
    assert texts(raws) == ""
    assert RawUsage(80, 41) in raws


@pytest.mark.parametrize(
    ("recording", "reasoning", "answer"),
    [
        ("chat/reasoning_content.sse", "The user asks 2+2. That is 4.", "4."),
        ("chat/reasoning_field.sse", "Short question, short answer.", "Yes."),
    ],
)
async def test_chat_reasoning_fields_are_reasoning_not_text(
    recording: str, reasoning: str, answer: str
) -> None:
    raws = await deltas(ChatCompletionsProvider, recording)

    assert "".join(r.text for r in raws if isinstance(r, RawReasoning)) == reasoning
    assert texts(raws) == answer


async def test_chat_think_tags_split_across_chunks_become_reasoning_in_the_round() -> None:
    raws = await deltas(ChatCompletionsProvider, "chat/think_tags.sse")
    round_ = RoundBuilder()
    events = [event for raw in raws for event in round_.feed(raw)] + round_.finish()

    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    thought = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert shown == "The capital of France is Paris."
    assert thought == "Paris is the capital."
    assert "<" not in shown


async def test_chat_keepalives_fields_crlf_and_multiline_data_are_read_through() -> None:
    raws = await deltas(ChatCompletionsProvider, "chat/keepalives.sse")

    assert texts(raws) == "Hi there"


async def test_chat_error_event_after_the_200_fails_with_the_providers_words() -> None:
    error = await failure(ChatCompletionsProvider, "chat/error_event.sse")

    assert "The server had an error while processing your request" in str(error)


async def test_chat_a_chunk_cut_mid_json_is_a_malformed_stream() -> None:
    error = await failure(ChatCompletionsProvider, "chat/malformed.sse")

    assert "malformed stream chunk" in str(error)


async def test_chat_a_stream_without_done_was_cut() -> None:
    error = await failure(ChatCompletionsProvider, "chat/cut.sse")

    assert isinstance(error, ProviderConnectionError)
    assert "without [DONE]" in str(error)


async def test_chat_an_html_page_is_a_bad_response() -> None:
    error = await failure(ChatCompletionsProvider, "chat/html.txt", content_type="text/html")

    assert isinstance(error, ProviderBadResponse)
    assert "HTML page" in str(error)


# -- Responses ----------------------------------------------------------------------------------


async def test_responses_text_is_streamed_once_with_usage() -> None:
    raws = await deltas(ResponsesProvider, "responses/text.sse")

    # The finished message item repeats the text: it must not be delivered twice.
    assert texts(raws) == "Hello, world! ✓ 👋🏽"
    assert raws[-1] == RawUsage(12, 7)


async def test_responses_tool_call_arguments_split_across_events_are_reassembled() -> None:
    raws = await deltas(ResponsesProvider, "responses/tool_calls.sse")

    assert calls(raws) == {
        0: ("call_Wq9", "get_weather", '{"city": "Paris"}'),
        1: ("call_Zr4", "get_time", '{"zone": "Europe/Paris"}'),
    }


async def test_responses_reasoning_summary_is_summary_reasoning_once() -> None:
    raws = await deltas(ResponsesProvider, "responses/reasoning.sse")

    reasoning = [r for r in raws if isinstance(r, RawReasoning)]
    assert "".join(r.text for r in reasoning) == "The user asks 2+2. That is 4."
    assert all(r.summary for r in reasoning)
    assert texts(raws) == "4."


@pytest.mark.parametrize(
    ("recording", "words"),
    [
        ("responses/error.sse", "The server had an error while processing your request."),
        ("responses/failed.sse", "The model failed to finish."),
    ],
)
async def test_responses_error_and_failed_events_fail_with_the_providers_words(
    recording: str, words: str
) -> None:
    error = await failure(ResponsesProvider, recording)

    assert words in str(error)


async def test_responses_a_stream_without_completed_was_cut() -> None:
    error = await failure(ResponsesProvider, "responses/cut.sse")

    assert isinstance(error, ProviderConnectionError)


async def test_the_tool_call_fragments_keep_their_index() -> None:
    # Chat Completions numbers calls with ``index``; Responses with ``output_index``.
    for kind, recording in (
        (ChatCompletionsProvider, "chat/tool_calls.sse"),
        (ResponsesProvider, "responses/tool_calls.sse"),
    ):
        raws = await deltas(kind, recording)
        assert {r.index for r in raws if isinstance(r, RawToolCall)} == {0, 1}

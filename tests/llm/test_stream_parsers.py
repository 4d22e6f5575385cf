"""The providers' stream parsers (``ChatChunks``, ``ResponseEvents``) fed a body a network read
at a time: the deltas and the way the stream ends are the same however the network cut it up.

The parsers are the pure core of ``stream()`` (bytes in, raw deltas out); ``outcome`` drives one
as ``stream()`` does. The recorded bodies of ``test_chunk_parsing.py`` run the same parsers
under the SDK; here hypothesis writes the bodies (line ends of every kind, keep-alives,
multi-line data, UTF-8 cut between reads, every way a stream ends) and the cuts.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from iris.errors import ProviderBadResponse, ProviderConnectionError, ProviderError
from iris.llm.chat_completions import ChatChunks
from iris.llm.provider import RawDelta, RawReasoning, RawText, RawToolCall, RawUsage
from iris.llm.responses_api import ResponseEvents

Parser = ChatChunks | ResponseEvents
Outcome = tuple[list[RawDelta], tuple[type[ProviderError], str] | None]


def outcome(parser: Parser, reads: list[bytes]) -> Outcome:
    """The deltas and the error (None: a finished stream), read as ``stream()`` reads."""
    deltas: list[RawDelta] = []
    for data in reads:
        deltas += parser.feed(data)
        if parser.over:
            break
    deltas += parser.end()
    try:
        if isinstance(parser, ChatChunks):
            parser.close()
        else:
            parser.close("text/event-stream")
    except ProviderError as exc:
        return deltas, (type(exc), str(exc))
    return deltas, None


def cut(body: bytes, at: list[int]) -> list[bytes]:
    """``body`` cut at the offsets ``at`` (no empty read: the socket never gives one)."""
    edges = sorted({0, len(body), *(n % (len(body) + 1) for n in at)})
    return [body[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


# Text a model writes: non-ASCII (cut between reads mid-character), JSON escapes, characters
# that are line breaks to ``str.splitlines`` but not to SSE.
_WORDS = st.text(alphabet=st.sampled_from([*'ab "\\é✓👋\u2028\x85\r\n\t{}']), min_size=1)
_ENDS = st.sampled_from(["\n", "\r\n", "\r"])


def _event(payload: dict[str, Any], multiline: bool, name: str = "") -> list[str]:
    """An event's lines: its JSON on one data line, or spread over several."""
    text = json.dumps(payload, ensure_ascii=False, indent=1 if multiline else None)
    head = [f"event: {name}"] if name else []
    return [*head, *(f"data: {line}" for line in text.split("\n")), ""]


@st.composite
def chat_bodies(draw: st.DrawFn) -> tuple[bytes, str]:
    """A Chat Completions body and the text it carries."""
    lines: list[str] = [": OPENROUTER PROCESSING", ""] if draw(st.booleans()) else []
    words = draw(st.lists(_WORDS, max_size=6))
    for word in words:
        delta: dict[str, Any] = {"content": word}
        if draw(st.booleans()):
            delta["role"] = "assistant"
        chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
        lines += _event(chunk, draw(st.booleans()))
        if draw(st.booleans()):
            lines += [": ping", "", "id: 7", "retry: 300"]
    ending = draw(st.sampled_from(["done", "finish", "finish+done", "cut", "bad", "error"]))
    if "finish" in ending:
        lines += _event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, False)
        lines += _event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}, 0)
    elif ending == "bad":
        lines += ['data: {"choices": [', ""]
    elif ending == "error":
        lines += _event({"error": {"message": "overloaded"}}, False)
    if "done" in ending:
        lines += ["data: [DONE]", ""]
    end = draw(_ENDS)
    tail = draw(st.sampled_from(["", ": ping", "data: [DON", "data: {}"]))  # unended: no event
    return ("".join(line + end for line in lines) + tail).encode(), "".join(words)


@settings(max_examples=300)
@given(chat_bodies(), st.lists(st.integers(min_value=0), max_size=12))
def test_chat_deltas_and_ending_are_the_same_however_the_body_is_cut(
    body_text: tuple[bytes, str], at: list[int]
) -> None:
    body, text = body_text
    whole = outcome(ChatChunks(), [body] if body else [])
    assert outcome(ChatChunks(), cut(body, at)) == whole
    deltas, error = whole
    assert "".join(d.text for d in deltas if isinstance(d, RawText)) == text
    if error is not None:
        assert error[0] in (ProviderConnectionError, ProviderBadResponse, ProviderError)


def test_chat_a_body_cut_one_byte_a_read_keeps_a_character_that_straddles_two_reads() -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "👋🏽 é"}, "finish_reason": "stop"}]}
    body = f"data: {json.dumps(chunk, ensure_ascii=False)}\r\n\r\n".encode()

    deltas, error = outcome(ChatChunks(), [body[i : i + 1] for i in range(len(body))])

    assert (deltas, error) == ([RawText("👋🏽 é")], None)


def test_chat_a_bad_utf8_byte_reads_as_a_replacement_character() -> None:
    body = b'data: {"choices":[{"delta":{"content":"a\xffb"},"finish_reason":"stop"}]}\n\n'

    assert outcome(ChatChunks(), [body]) == ([RawText("a\ufffdb")], None)


def test_chat_the_text_before_an_error_in_the_same_read_still_arrives_first() -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "Partial"}}]}
    body = f'data: {json.dumps(chunk)}\n\ndata: {{"error": {{"message": "boom"}}}}\n\n'

    deltas, error = outcome(ChatChunks(), [body.encode()])

    assert deltas == [RawText("Partial")]
    assert error == (ProviderError, "provider error: boom")


def test_chat_every_part_of_a_delta_in_order_and_a_finish_in_a_later_choice() -> None:
    delta = {
        "reasoning_content": "think",
        "content": "say",
        "tool_calls": [{"index": 1, "id": "c1", "function": {"name": "f", "arguments": "{"}}],
    }
    chunks = [
        {"choices": [{"index": 0, "delta": delta}], "usage": {"prompt_tokens": 1}},
        {"choices": [{"index": 0, "delta": {}}, {"index": 1, "finish_reason": "stop"}]},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode()

    assert outcome(ChatChunks(), [body]) == (
        [
            RawUsage(1, 0),
            RawReasoning("think"),
            RawText("say"),
            RawToolCall(1, "c1", "f", "{"),
        ],
        None,  # the second choice finished: a stream that ends there was not cut
    )


def test_chat_a_body_that_is_not_sse_is_a_bad_response_wherever_it_turns() -> None:
    for reads in ([b"<html><body>Bad gateway"], [b"<html>\n", b"<body>\n"], [b"\n\nplain"]):
        deltas, error = outcome(ChatChunks(), reads)
        assert deltas == [] and error is not None and error[0] is ProviderBadResponse


@st.composite
def responses_bodies(draw: st.DrawFn) -> tuple[bytes, str]:
    """A Responses body and the text it carries."""
    lines = _event({"type": "response.created", "response": {}}, False, "response.created")
    words = draw(st.lists(_WORDS, max_size=6))
    for word in words:
        event = {"type": "response.output_text.delta", "output_index": 0, "delta": word}
        lines += _event(event, draw(st.booleans()), "response.output_text.delta")
        if draw(st.booleans()):
            lines += [": keep-alive", ""]
    item = {"type": "message", "content": [{"type": "output_text", "text": "".join(words)}]}
    done = {"type": "response.output_item.done", "output_index": 0, "item": item}
    lines += _event(done, draw(st.booleans()), "response.output_item.done")
    ending = draw(st.sampled_from(["completed", "completed+done", "cut", "done", "failed"]))
    if ending.startswith("completed"):
        usage = {"input_tokens": 5, "output_tokens": 6}
        completed = {"type": "response.completed", "response": {"usage": usage}}
        lines += _event(completed, False, "response.completed")
    elif ending == "failed":
        failed = {"type": "response.failed", "response": {"error": {"message": "no"}}}
        lines += _event(failed, False, "response.failed")
    if ending.endswith("done"):
        lines += ["data: [DONE]", ""]
    end = draw(_ENDS)
    return "".join(line + end for line in lines).encode(), "".join(words)


@settings(max_examples=200)
@given(responses_bodies(), st.lists(st.integers(min_value=0), max_size=12))
def test_responses_deltas_and_ending_are_the_same_however_the_body_is_cut(
    body_text: tuple[bytes, str], at: list[int]
) -> None:
    body, text = body_text
    whole = outcome(ResponseEvents(), [body])
    assert outcome(ResponseEvents(), cut(body, at)) == whole
    deltas, _ = whole
    # The finished message item repeats the text: it is not delivered twice.
    assert "".join(d.text for d in deltas if isinstance(d, RawText)) == text


def test_responses_nothing_after_done_counts() -> None:
    completed = {"type": "response.completed", "response": {}}
    body = f"data: [DONE]\n\ndata: {json.dumps(completed)}\n\n".encode()

    deltas, error = outcome(ResponseEvents(), [body])

    assert deltas == [] and error is not None and error[0] is ProviderBadResponse

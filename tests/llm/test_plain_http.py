"""``iris.llm.plain_http``: the SDK's requests to a plain-HTTP provider go out on kept-alive
connections, and come back whole, whatever the provider does with its connection.

A raw provider on 127.0.0.1 (asyncio streams, exact bytes) counts the connections it accepts
and answers each request as the test scripts it; the real provider and SDK client talk to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iris.config import ModelEndpoint
from iris.errors import ProviderConnectionError, ProviderTimeout
from iris.llm.chat_completions import ChatCompletionsProvider
from iris.llm.provider import ProviderRequest, RawText

REQUEST = ProviderRequest("gpt-4.1-mini", [{"role": "user", "content": "hi"}])
WORDS = ["Hel", "lo, ", "wörld", " — ", "again"]
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def sse(words: Sequence[str]) -> bytes:
    chunks: list[object] = [{"choices": [{"index": 0, "delta": {"content": w}}]} for w in words]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def chunked(body: bytes, size: int = 9) -> bytes:
    parts = [body[at : at + size] for at in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts) + b"0\r\n\r\n"


def whole(words: Sequence[str]) -> bytes:
    """A non-streamed Chat Completions answer with a content-length."""
    body = json.dumps(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4.1-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "".join(words)},
                    "finish_reason": "stop",
                }
            ],
        }
    ).encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    return head % len(body) + body


# What the provider does with a request: (the request's number on its connection, the
# request's head) -> the pieces it writes, one write and a turn of the loop each, and then
# whether it closes the connection. A piece that is None is a pause of 50 ms (in which the
# provider notices the client closing the connection, as servers do).
Script = Callable[[int, bytes], tuple[Sequence[bytes | None], bool]]


@dataclass
class Provider:
    script: Script
    connections: int = 0
    requests: int = 0
    answered: int = 0  # answers written to their end
    closed: asyncio.Event = field(default_factory=asyncio.Event)  # a connection it saw close
    tasks: set[asyncio.Task[None]] = field(default_factory=set[asyncio.Task[None]])

    async def answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)  # type: ignore[arg-type]
        self.connections += 1
        try:
            for number in range(1_000):
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                )
                await reader.readexactly(length)
                self.requests += 1
                pieces, close = self.script(number, head)
                for piece in pieces:
                    if piece is None:
                        with contextlib.suppress(TimeoutError):
                            if not await asyncio.wait_for(reader.read(1), 0.05):
                                raise ConnectionResetError("the client closed")
                        continue
                    await asyncio.sleep(0.001)
                    writer.write(piece)
                    await writer.drain()
                self.answered += 1
                if close:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self.closed.set()


async def talking_to(
    script: Script,
    use: Callable[[ChatCompletionsProvider, Provider], Awaitable[None]],
    **endpoint: float,
) -> Provider:
    provider = Provider(script)
    server = await asyncio.start_server(provider.answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = ChatCompletionsProvider(
        ModelEndpoint(name="raw", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", **endpoint)
    )
    try:
        await use(client, provider)
    finally:
        await client.aclose()
        server.close()
        await asyncio.wait_for(asyncio.gather(*provider.tasks), 5)
    return provider


async def text_of(client: ChatCompletionsProvider) -> str:
    return "".join([raw.text async for raw in client.stream(REQUEST) if isinstance(raw, RawText)])


async def whole_text_of(client: ChatCompletionsProvider) -> str:
    return "".join([raw.text async for raw in client.complete(REQUEST) if isinstance(raw, RawText)])


async def settled(provider: Provider) -> None:
    """Until the provider wrote all it was asked for and the client read it: a stream's
    reader stops at ``[DONE]``, and its connection goes back once the framing's end is read."""
    for _ in range(500):
        if provider.answered == provider.requests:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)


def streamed(pieces: int = 9) -> Script:
    framed = STREAM_HEAD + chunked(sse(WORDS))
    cuts = [framed[at : at + pieces] for at in range(0, len(framed), pieces)]
    return lambda number, head: (cuts, False)


async def test_answers_read_to_their_end_keep_their_connection() -> None:
    def script(number: int, head: bytes) -> tuple[Sequence[bytes | None], bool]:
        if number == 2:
            return [whole(WORDS)], False
        return streamed()(number, head)

    async def use(client: ChatCompletionsProvider, provider: Provider) -> None:
        assert await text_of(client) == "".join(WORDS)
        await settled(provider)
        assert await text_of(client) == "".join(WORDS)
        await settled(provider)
        assert await whole_text_of(client) == "".join(WORDS)
        assert await text_of(client) == "".join(WORDS)

    provider = await talking_to(script, use)
    assert (provider.connections, provider.requests) == (1, 4)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(head_cut=st.integers(1, 90), body_cut=st.integers(1, 400))
def test_a_kept_answer_cut_anywhere_arrives_whole_and_keeps_its_connection(
    head_cut: int, body_cut: int
) -> None:
    body = chunked(sse(WORDS), size=7)
    pieces = [STREAM_HEAD[:head_cut], STREAM_HEAD[head_cut:] + body[:body_cut], body[body_cut:]]

    async def use(client: ChatCompletionsProvider, provider: Provider) -> None:
        for _ in range(2):
            assert await text_of(client) == "".join(WORDS)
            await settled(provider)

    provider = asyncio.run(talking_to(lambda number, head: ([p for p in pieces if p], False), use))
    assert (provider.connections, provider.requests) == (1, 2)


async def test_the_end_of_the_framing_after_the_last_event_still_keeps_the_connection() -> None:
    framed = STREAM_HEAD + chunked(sse(WORDS), size=1_000)
    pieces = [framed[: -len(b"0\r\n\r\n")], None, b"0\r\n\r\n"]  # [DONE], a pause, the end

    async def use(client: ChatCompletionsProvider, provider: Provider) -> None:
        assert await text_of(client) == "".join(WORDS)
        await settled(provider)
        assert await text_of(client) == "".join(WORDS)

    provider = await talking_to(lambda number, head: (pieces, False), use)
    assert provider.connections == 1


async def test_a_stream_left_early_closes_its_connection_so_the_provider_stops() -> None:
    body = sse(WORDS)
    events = [b"%x\r\n%s\r\n" % (len(e) + 2, e + b"\n\n") for e in body.split(b"\n\n")[:-1]]
    calls: list[int] = []

    def script(number: int, head: bytes) -> tuple[Sequence[bytes | None], bool]:
        calls.append(number)
        if len(calls) == 1:
            return [STREAM_HEAD, events[0], *([None] * 40), *events[1:], b"0\r\n\r\n"], False
        return streamed()(number, head)

    async def use(client: ChatCompletionsProvider, provider: Provider) -> None:
        deltas = client.stream(REQUEST)
        async for raw in deltas:
            if isinstance(raw, RawText):
                break
        await deltas.aclose()  # the turn was interrupted
        await asyncio.wait_for(provider.closed.wait(), 1.0)  # well before the answer's end
        assert await text_of(client) == "".join(WORDS)

    provider = await talking_to(script, use)
    assert provider.connections == 2


async def test_a_connection_the_provider_closed_as_the_request_went_out_is_replaced() -> None:
    """A kept-alive connection the provider dropped just as the next request was written
    (its keep-alive ran out): the request goes out once more on a fresh connection."""

    def script(number: int, head: bytes) -> tuple[Sequence[bytes | None], bool]:
        if number == 1:
            return [], True  # read the request, answer nothing, close
        return streamed()(number, head)

    async def use(client: ChatCompletionsProvider, provider: Provider) -> None:
        assert await text_of(client) == "".join(WORDS)
        await settled(provider)
        assert await text_of(client) == "".join(WORDS)

    provider = await talking_to(script, use)
    assert (provider.connections, provider.requests) == (2, 3)


async def test_bytes_after_an_answer_end_its_connection() -> None:
    answer = STREAM_HEAD + chunked(sse(WORDS))

    async def use(client: ChatCompletionsProvider, provider: Provider) -> None:
        assert await text_of(client) == "".join(WORDS)
        await settled(provider)
        assert await text_of(client) == "".join(WORDS)

    provider = await talking_to(lambda number, head: ([answer + b"HTTP/1.1 200"], False), use)
    assert provider.connections == 2


async def test_an_http_1_0_answer_is_read_to_its_close_and_its_connection_not_kept() -> None:
    """Servers built on Python's ``http.server`` answer HTTP/1.0 by default."""
    answer = b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + sse(WORDS)

    async def use(client: ChatCompletionsProvider, provider: Provider) -> None:
        for _ in range(2):
            assert await text_of(client) == "".join(WORDS)

    provider = await talking_to(lambda number, head: ([answer], True), use)
    assert provider.connections == 2


async def test_an_answer_with_both_a_coding_and_a_length_is_refused() -> None:
    """Both ``transfer-encoding`` and ``content-length`` mark a response split or smuggled
    (RFC 9112 §6.3): the answer is not read, its connection not kept."""
    answer = STREAM_HEAD.replace(b"\r\n\r\n", b"\r\ncontent-length: 3\r\n\r\n")

    async def use(client: ChatCompletionsProvider, provider: Provider) -> None:
        with pytest.raises(ProviderConnectionError):
            await text_of(client)

    await talking_to(lambda number, head: ([answer + chunked(sse(WORDS))], False), use)


async def test_an_interim_answer_is_skipped() -> None:
    answer = STREAM_HEAD + chunked(sse(WORDS))

    async def use(client: ChatCompletionsProvider, provider: Provider) -> None:
        assert await text_of(client) == "".join(WORDS)

    await talking_to(lambda number, head: ([b"HTTP/1.1 100 Continue\r\n\r\n", answer], False), use)


@pytest.mark.parametrize(
    "answer",
    [b"", b"HTTP/1.1 200 OK\r\ncontent-le", b"NOT HTTP AT ALL\r\n\r\n", b"HTTP/2 200\r\n\r\n"],
    ids=["nothing", "half a head", "not HTTP", "HTTP/2"],
)
async def test_a_provider_that_does_not_answer_http_is_a_connection_error(answer: bytes) -> None:
    async def use(client: ChatCompletionsProvider, provider: Provider) -> None:
        with pytest.raises(ProviderConnectionError):
            await text_of(client)

    await talking_to(lambda number, head: ([answer] if answer else [], True), use)


async def test_no_answer_head_in_time_is_a_timeout() -> None:
    async def use(client: ChatCompletionsProvider, provider: Provider) -> None:
        with pytest.raises(ProviderTimeout):
            await text_of(client)

    await talking_to(lambda number, head: ([None] * 20, True), use, timeout=0.3)


async def test_a_refused_connection_is_a_connection_error() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    client = ChatCompletionsProvider(
        ModelEndpoint(name="raw", base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
    )
    try:
        with pytest.raises(ProviderConnectionError):
            await text_of(client)
    finally:
        await client.aclose()


async def test_a_key_that_would_add_a_header_is_never_sent() -> None:
    """An API key read from a file or the environment with a line break in it: httpx's own
    transport refused it (h11); so does this one, before a byte goes out."""
    provider = Provider(streamed())
    server = await asyncio.start_server(provider.answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    key = "sk-1\r\nx-injected: yes"
    client = ChatCompletionsProvider(
        ModelEndpoint(name="raw", base_url=f"http://127.0.0.1:{port}/v1", api_key=key)
    )
    try:
        with pytest.raises(ProviderConnectionError):
            await text_of(client)
    finally:
        await client.aclose()
        server.close()
    assert (provider.connections, provider.requests) == (0, 0)


async def test_a_proxy_named_by_the_environment_still_carries_the_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``HTTP_PROXY`` set: the requests go through the proxy (here the raw provider, which
    answers whatever it is asked), as the SDK's own client sends them."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    provider = Provider(streamed())
    server = await asyncio.start_server(provider.answer, "127.0.0.1", 0)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
    client = ChatCompletionsProvider(
        ModelEndpoint(name="raw", base_url="http://provider.invalid:9/v1", api_key="k")
    )
    try:
        assert await text_of(client) == "".join(WORDS)
    finally:
        await client.aclose()
        server.close()
    assert provider.requests == 1


async def test_an_answer_given_before_the_request_body_was_read_ends_its_connection() -> None:
    """A provider that answers a large request from its head alone while the body is still
    on its way: the rest of that body must never reach it as the next request."""
    connections: list[asyncio.Task[object] | None] = []
    answers = [whole(WORDS), STREAM_HEAD + chunked(sse(WORDS))]

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(asyncio.current_task())
        try:
            await reader.readuntil(b"\r\n\r\n")  # the head only: the body is left unread
            writer.write(answers[len(connections) - 1])
            await writer.drain()
            while await reader.read(1 << 20):  # then read on, answering nothing more
                pass
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = ChatCompletionsProvider(
        ModelEndpoint(name="raw", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", timeout=5)
    )
    large = ProviderRequest("m", [{"role": "user", "content": "x" * (8 << 20)}])
    try:
        texts = [raw.text async for raw in client.complete(large) if isinstance(raw, RawText)]
        assert "".join(texts) == "".join(WORDS)
        assert await text_of(client) == "".join(WORDS)
    finally:
        await client.aclose()
        server.close()
        await asyncio.wait_for(asyncio.gather(*filter(None, connections)), 5)
    assert len(connections) == 2

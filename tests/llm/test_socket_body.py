"""``iris.llm.socket_body``: a streamed answer read off its socket arrives whole, however the
upstream frames and cuts it; what cannot be read so still reads through httpx.

A raw upstream on 127.0.0.1 writes an exact response (head, framing, pauses between writes)
to the real provider and SDK client; the framing property runs on the protocol alone.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Sequence

import pytest
import uvloop
from hypothesis import given, settings
from hypothesis import strategies as st

from iris.config import ModelEndpoint
from iris.errors import ProviderConnectionError
from iris.llm import chat_completions
from iris.llm.chat_completions import ChatCompletionsProvider
from iris.llm.provider import ProviderRequest, RawText
from iris.llm.socket_body import SocketBody, body_of

REQUEST = ProviderRequest("gpt-4.1-mini", [{"role": "user", "content": "hi"}])
WORDS = ["Hel", "lo, ", "wörld", " — ", "again"]


def sse(words: Sequence[str]) -> bytes:
    """A Chat Completions stream of ``words``, finished, then ``[DONE]``."""
    chunks = [{"choices": [{"index": 0, "delta": {"content": word}}]} for word in words]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def chunked(body: bytes, size: int = 7) -> bytes:
    parts = [body[at : at + size] for at in range(0, len(body), size)]
    framed = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(part), part) for part in parts)
    return framed + b"0\r\nx-trailer: yes\r\n\r\n"


async def upstream(
    head: bytes, pieces: Sequence[bytes], answers: set[asyncio.Task[object]]
) -> tuple[asyncio.Server, str]:
    """A server that answers every request with ``head`` then ``pieces``, one write (and a
    turn of the loop) each, then closes the connection; ``answers`` gets each answer's task."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            answers.add(task)
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(head)
            for piece in pieces:
                await asyncio.sleep(0.001)
                writer.write(piece)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1"


def head(*fields: str) -> bytes:
    lines = ["HTTP/1.1 200 OK", "content-type: text/event-stream", *fields]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def streamed_text(head: bytes, pieces: Sequence[bytes], turns: int = 1) -> list[str]:
    answers: set[asyncio.Task[object]] = set()
    server, base_url = await upstream(head, pieces, answers)
    provider = ChatCompletionsProvider(ModelEndpoint(name="raw", base_url=base_url, api_key="k"))
    try:
        texts: list[str] = []
        for _ in range(turns):
            raws = [raw async for raw in provider.stream(REQUEST)]
            texts.append("".join(raw.text for raw in raws if isinstance(raw, RawText)))
        return texts
    finally:
        await provider.aclose()
        server.close()
        await asyncio.gather(*answers)  # each answer ends at its connection's close


def cut(data: bytes, size: int) -> list[bytes]:
    return [data[at : at + size] for at in range(0, len(data), size)]


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_chunked_answer_cut_anywhere_arrives_whole_turn_after_turn(
    monkeypatch: pytest.MonkeyPatch, loop: str
) -> None:
    taken: list[object] = []

    def spied(response: object) -> object:
        taken.append(body_of(response))
        return taken[-1]

    monkeypatch.setattr(chat_completions, "body_of", spied)
    framed = chunked(sse(WORDS))
    reading = streamed_text(head("transfer-encoding: chunked"), cut(framed, 5), turns=2)
    texts = uvloop.run(reading) if loop == "uvloop" else asyncio.run(reading)
    assert texts == ["".join(WORDS)] * 2
    # both read off the socket, not by httpx
    assert len(taken) == 2 and all(isinstance(body, SocketBody) for body in taken)


async def test_a_content_length_answer_and_one_that_ends_at_the_close_arrive_whole() -> None:
    body = sse(WORDS)
    sized = await streamed_text(head(f"content-length: {len(body)}"), cut(body, 11))
    to_close = await streamed_text(head("connection: close"), cut(body, 11))
    assert sized == to_close == ["".join(WORDS)]


async def test_a_gzipped_answer_still_reads_through_httpx() -> None:
    fields = ("content-encoding: gzip", "transfer-encoding: chunked")
    texts = await streamed_text(head(*fields), cut(chunked(gzip.compress(sse(WORDS))), 9))
    assert texts == ["".join(WORDS)]


@pytest.mark.parametrize("end", [100, 180], ids=["inside a chunk", "between two chunks"])
async def test_a_connection_closed_inside_the_framing_is_a_lost_connection(end: int) -> None:
    framed = chunked(sse(WORDS))[:end]  # each chunk 18 bytes framed
    with pytest.raises(ProviderConnectionError, match="connection to the provider lost"):
        await streamed_text(head("transfer-encoding: chunked"), [framed])


async def test_a_broken_chunk_size_is_a_lost_connection_not_a_hang() -> None:
    with pytest.raises(ProviderConnectionError, match="framing is broken"):
        await streamed_text(head("transfer-encoding: chunked"), [b"zz\r\ndata: x\r\n"])


# -- the framing alone ----------------------------------------------------------------------


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.aborted = False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        self.aborted = True


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(min_size=1, max_size=40), max_size=8),
    st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=20),
)
def test_chunked_framing_is_undone_however_the_reads_fall(
    chunks: list[bytes], reads: list[int]
) -> None:
    framed = b"".join(b"%X\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\nafter"
    body = SocketBody(_Transport(), None, chunked=True)
    at, turn = 0, 0
    while at < len(framed):
        size = reads[turn % len(reads)]
        body.data_received(framed[at : at + size])
        at, turn = at + size, turn + 1

    async def everything() -> bytes:
        parts: list[bytes] = []
        while part := await body.read():
            parts.append(part)
        return b"".join(parts)

    assert asyncio.run(everything()) == b"".join(chunks)  # the bytes past the end are not in it

"""CPU time of a proxied chunk's upstream read alone: framed bytes in, raw deltas out.

No network and no server: a ``SocketBody`` (``iris.llm.socket_body``) is handed one HTTP chunk
per network read, as the fake upstream of ``chunk_cost.py`` writes them (one event per chunk,
the test fakes' Chat Completions chunk or Responses ``output_text.delta`` event), and a task
reads it as the provider's ``stream()`` does (``ChatChunks`` / ``ResponseEvents`` fed a read at
a time, one async generator) to the end. The same loop with a reader that parses nothing (a
turn of the event loop per read, the chunked framing undone, the reader woken) is measured
first and subtracted: what is left is the parse, from a read's bytes to the deltas the agent
gets, per chunk (``time.process_time``, the best of ``--runs``).

    python bench/upstream_read.py [--chunks 20000] [--runs 5] [--per-read 1]

``chunk_cost.py --against`` is the figure that counts (the whole server); this one isolates
the part of it that ``iris.llm`` owns, with less of the machine's noise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from iris.llm.chat_completions import ChatChunks  # noqa: E402
from iris.llm.provider import RawDelta  # noqa: E402
from iris.llm.responses_api import ResponseEvents  # noqa: E402
from iris.llm.socket_body import SocketBody  # noqa: E402

Reader = Callable[[SocketBody], AsyncGenerator[Any]]


class _Transport(asyncio.Transport):
    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        pass


def _framed(event: bytes) -> bytes:
    return f"{len(event):x}\r\n".encode() + event + b"\r\n"


def chat_event(i: int) -> bytes:
    chunk = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1764540000,
        "model": "bench-model",
        "choices": [{"index": 0, "delta": {"content": f"tok{i} "}, "finish_reason": None}],
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def responses_event(i: int) -> bytes:
    event = {
        "type": "response.output_text.delta",
        "sequence_number": i,
        "item_id": "msg_bench",
        "output_index": 0,
        "content_index": 0,
        "delta": f"tok{i} ",
        "logprobs": [],
    }
    data = json.dumps(event, separators=(",", ":")).encode()
    return b"event: response.output_text.delta\ndata: " + data + b"\n\n"


async def nothing(body: SocketBody) -> AsyncGenerator[bytes]:
    """The feeding loop alone: each read taken, nothing parsed."""
    while data := await body.read():
        yield data


async def chat(body: SocketBody) -> AsyncGenerator[RawDelta]:
    chunks = ChatChunks()
    while data := await body.read():
        for raw in chunks.feed(data):
            yield raw
        if chunks.over:
            break


async def responses(body: SocketBody) -> AsyncGenerator[RawDelta]:
    events = ResponseEvents()
    while data := await body.read():
        for raw in events.feed(data):
            yield raw
        if events.over:
            break


async def one_run(reader: Reader, reads: list[bytes], chunks: int) -> float:
    """µs of CPU per chunk to feed ``reads`` to a body that ``reader`` reads."""
    body = SocketBody(_Transport(), None, chunked=True)
    got = 0

    async def consume() -> None:
        nonlocal got
        async for _ in reader(body):
            got += 1

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    start = time.process_time()
    for data in reads:
        body.data_received(data)
        await asyncio.sleep(0)  # the reader takes each read before the next arrives
    spent = time.process_time() - start
    body.data_received(b"0\r\n\r\n")  # the last chunk: the body ends
    await task
    assert got >= len(reads), f"{got} items for {len(reads)} reads"  # read to the end
    return spent / chunks * 1e6


def measure(reader: Reader, event: Callable[[int], bytes], args: argparse.Namespace) -> float:
    n, per = args.chunks, args.per_read
    reads = [b"".join(_framed(event(i + j)) for j in range(per)) for i in range(0, n, per)]
    return min(asyncio.run(one_run(reader, reads, n)) for _ in range(args.runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--per-read", type=int, default=1, help="chunks per network read")
    args = parser.parse_args()
    base = measure(nothing, chat_event, args)
    print(f"{args.chunks} chunks, {args.per_read} per read; µs of CPU per chunk (best of runs)")
    print(f"  reads taken, nothing parsed  {base:6.2f}")
    for name, reader, event in (
        ("chat", chat, chat_event),
        ("responses", responses, responses_event),
    ):
        total = measure(reader, event, args)
        print(f"  {name:10s} parse + deltas  {total - base:6.2f}  (in all {total:6.2f})")


if __name__ == "__main__":
    main()

"""A lean Chat Completions proxy: what a proxied chunk costs in Python on this machine, as a
floor under Iris's figure in ``bench/chunk_cost.py``.

It does what the issue calls "a lean Python proxy that parses a line and writes a line" and no
more: one streamed request in, one upstream request out, and for each upstream event the data
line parsed (``json.loads``), a chunk of the same shape built and encoded (``json.dumps``), and
written to the client in the HTTP/1.1 chunked encoding. The hot path is a protocol's
``data_received`` that writes straight to the client's transport: no task, no queue, no
timeout, no validation, no store, no back-pressure, no errors handled. The request's own cost
(its head, the upstream connection) is in its figure as it is in Iris's.

    python bench/lean_proxy.py PORT UPSTREAM_PORT   # serves until killed (uvloop)
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, cast

HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
)


class Relay(asyncio.Protocol):
    """The upstream side of one stream: a chunked SSE body in, each event re-encoded out."""

    def __init__(self, client: asyncio.WriteTransport, done: asyncio.Future[None]) -> None:
        self.client = client
        self.done = done
        self.buffer = b""
        self.in_head = True

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data
        if self.in_head:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                self.buffer = buffer
                return
            buffer, self.in_head = buffer[end + 4 :], False
        while (line_end := buffer.find(b"\r\n")) >= 0:
            size = int(buffer[:line_end], 16)
            start = line_end + 2
            if len(buffer) < start + size + 2:
                break
            frame, buffer = buffer[start : start + size], buffer[start + size + 2 :]
            if size == 0:
                self.client.write(b"0\r\n\r\n")
                self.finish()
                break
            for line in frame.split(b"\n"):
                if line.startswith(b"data: "):
                    self.client.write(self.event(line[6:]))
        self.buffer = buffer

    @staticmethod
    def event(payload: bytes) -> bytes:
        if payload == b"[DONE]":
            out = b"data: [DONE]\n\n"
        else:
            chunk = json.loads(payload)
            choice = chunk["choices"][0]
            shaped = {
                "id": chunk["id"],
                "object": "chat.completion.chunk",
                "created": chunk["created"],
                "model": chunk["model"],
                "choices": [
                    {
                        "index": 0,
                        "delta": choice["delta"],
                        "finish_reason": choice.get("finish_reason"),
                    }
                ],
            }
            out = b"data: " + json.dumps(shaped, separators=(",", ":")).encode() + b"\n\n"
        return b"%x\r\n%b\r\n" % (len(out), out)

    def connection_lost(self, exc: Exception | None) -> None:
        self.finish()

    def finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def serve(port: int, upstream: int) -> None:
    loop = asyncio.get_running_loop()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:  # a probe of the port: connected, then closed
            writer.close()
            return
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        request: dict[str, Any] = json.loads(await reader.readexactly(length))
        body = json.dumps(
            {"model": request["model"], "messages": request["messages"], "stream": True}
        ).encode()
        done: asyncio.Future[None] = loop.create_future()
        client = cast(asyncio.WriteTransport, writer.transport)  # uvloop's: not a subclass
        relay, _ = await loop.create_connection(lambda: Relay(client, done), "127.0.0.1", upstream)
        relay.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            b"content-type: application/json\r\nconnection: close\r\n"
            b"content-length: %d\r\n\r\n%b" % (len(body), body)
        )
        writer.write(HEAD)
        await done
        relay.close()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


def main() -> None:
    import uvloop

    uvloop.run(serve(int(sys.argv[1]), int(sys.argv[2])))


if __name__ == "__main__":
    main()

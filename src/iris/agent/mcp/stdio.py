"""A stdio MCP child's transport with a cap on each message: newline-delimited JSON-RPC over its
stdin and stdout, as the SDK's ``stdio_client`` speaks it, but read through ``Lines``.

The SDK's reader joins a line's chunks until its newline and parses it whole, so one 50 MB
result held 50 MB (and more while joining) and stalled the event loop parsing it. Here a line
longer than ``max_bytes`` is never held: its first bytes are kept (to find its JSON-RPC ``id``)
and the rest is read and dropped up to its newline; the request it answered gets an error
response instead (``OVERSIZED``), so the call ends as a tool error at once. An oversized line
whose id is not among its first bytes answers the only request waiting, if there is one;
otherwise it is dropped (the call's idle timer ends it).

Shutdown follows the spec's order (stdin closed, a grace period, then the process group
killed), shielded so a cancelled caller never leaks a live child.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncGenerator, Callable
from typing import IO, Any

import anyio
import anyio.lowlevel
import mcp_types as types
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

OVERSIZED = -32001  # the error code of a response that was over the cap (dropped)
HEAD = 65_536  # bytes of an oversized line kept to find its id
GRACE = 2.0  # seconds the child gets to exit once its stdin is closed
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


class Lines:
    """Splits a byte stream into lines of at most ``max_bytes`` (pure). ``feed`` returns the
    lines a chunk completed: ``(line, None)``, or ``(head, size)`` for one over the cap (its
    first ``HEAD`` bytes and its whole size)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._over = 0  # bytes of the current line read so far, once it is over the cap

    def feed(self, chunk: bytes) -> list[tuple[bytes, int | None]]:
        out: list[tuple[bytes, int | None]] = []
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if self._over:
                self._over += len(piece)
            elif len(self._buffer) + len(piece) > self.max_bytes:
                self._over = len(self._buffer) + len(piece)
                self._buffer += piece[: max(0, HEAD - len(self._buffer))]
                del self._buffer[HEAD:]
            else:
                self._buffer += piece
            if end < 0:
                break
            out.append((bytes(self._buffer), self._over or None))
            self._buffer.clear()
            self._over = 0
            start = end + 1
        return out


def oversized_id(head: bytes) -> int | str | None:
    """The JSON-RPC id among an oversized line's first bytes, if one is there."""
    found = _ID.search(head)
    if found is None:
        return None
    with contextlib.suppress(ValueError):
        value = json.loads(found.group(1))
        if isinstance(value, int | str):
            return value
    return None


@contextlib.asynccontextmanager
async def stdio_transport(
    command: str,
    args: list[str],
    env: dict[str, str],
    errlog: IO[str],
    *,
    max_bytes: int,
    dropped: Callable[[int], None],
) -> AsyncGenerator[Any]:
    """The child's message streams, as ``stdio_client`` yields them; ``dropped(size)`` is
    called for each message over ``max_bytes``."""
    process: Process = await anyio.open_process(
        [command, *args],
        env=get_default_environment() | env,
        stderr=errlog,
        start_new_session=True,  # its whole tree can be killed at the end
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    pipes = _Pipes(process, read_writer, write_reader, max_bytes, dropped)
    async with anyio.create_task_group() as group:
        group.start_soon(pipes.read)
        group.start_soon(pipes.write)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            group.cancel_scope.cancel()


class _Pipes:
    """The child's stdout read as messages into the session, and the session's messages
    written to its stdin; an answer over ``max_bytes`` is dropped, and the request it answers
    gets an error in its place."""

    def __init__(
        self,
        process: Process,
        read_writer: MemoryObjectSendStream[SessionMessage | Exception],
        write_reader: MemoryObjectReceiveStream[SessionMessage],
        max_bytes: int,
        dropped: Callable[[int], None],
    ) -> None:
        self.process = process
        self.read_writer, self.write_reader = read_writer, write_reader
        self.max_bytes, self.dropped = max_bytes, dropped
        self.waiting: set[int | str] = set()  # ids of our requests not answered yet

    async def answered(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self.waiting.discard(message.id)  # pyright: ignore[reportArgumentType]
        await self.read_writer.send(SessionMessage(message))

    async def read(self) -> None:
        assert self.process.stdout is not None
        lines = Lines(self.max_bytes)
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async with self.read_writer:
                async for chunk in self.process.stdout:
                    # A read that finds data waiting does not yield: a server writing fast
                    # would hold the loop for the whole of a large answer.
                    await anyio.lowlevel.checkpoint()
                    for line, size in lines.feed(chunk):
                        if size is None:
                            await _deliver(line, self.read_writer, self.answered)
                        else:
                            await self._oversized(line, size)

    async def _oversized(self, line: bytes, size: int) -> None:
        """A message over the cap: dropped; the request it answers (named in its head, or
        the only one waiting) is answered with an error instead."""
        self.dropped(size)
        found = oversized_id(line)
        if found is None and len(self.waiting) == 1:
            found = next(iter(self.waiting))
        if found is None:
            return
        error = types.ErrorData(
            code=OVERSIZED,
            message=(
                f"the MCP server's answer was {size:,} bytes, over the cap of "
                f"{self.max_bytes:,} (tools.mcp.max_result_bytes); it was dropped"
            ),
        )
        await self.answered(types.JSONRPCError(jsonrpc="2.0", id=found, error=error))

    async def write(self) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with self.write_reader:
                async for item in self.write_reader:
                    message = item.message
                    if isinstance(message, types.JSONRPCRequest):
                        self.waiting.add(message.id)
                    data = message.model_dump_json(by_alias=True, exclude_unset=True)
                    await self.process.stdin.send(data.encode() + b"\n")
        await self.read_writer.aclose()  # the child stopped reading: the session sees the end


async def _deliver(
    line: bytes,
    stream: Any,
    answered: Callable[[types.JSONRPCMessage], Any],
) -> None:
    if not line.strip():
        return
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        await stream.send(exc)
        return
    await answered(message)


async def _stop(process: Process) -> None:
    """Stdin closed, ``GRACE`` seconds to exit, then the process group killed."""
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
    with anyio.move_on_after(GRACE):
        await process.wait()
        return
    with contextlib.suppress(ProcessLookupError, OSError):
        await terminate_posix_process_tree(process)
    with anyio.move_on_after(GRACE), contextlib.suppress(Exception):
        await process.wait()

"""A scripted iris WebSocket server on 127.0.0.1: the app's tests talk to it over a real socket.

It speaks the frame contract: ``hello`` (or a Bearer header) authenticates, a bad token closes
with 4401; chat-scoped frames get the chat's next ``seq`` and go into a log that ``resume``
replays; ``ready``/``pong``/``sync`` carry the latest seq. On ``message.send`` it plays the next
scripted turn — frames, with ``asyncio.Event`` gates where the test wants to hold it. ``drop()``
cuts every connection without a close frame, like a network failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Sequence
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from iris.fanout.rules import Frame

Step = Frame | asyncio.Event


class FakeIrisServer:
    def __init__(self, tokens: Sequence[str] = ("device-token",), chat_id: str = "chat-1") -> None:
        self.tokens = set(tokens)
        self.chat_id = chat_id
        self.log: list[Frame] = []  # every chat-scoped frame sent, with its seq
        self.received: list[Frame] = []  # every frame the app sent
        self.turns: deque[list[Step]] = deque()
        self.sync_on_resume = False  # pretend the log no longer reaches back
        self.connections: set[ServerConnection] = set()
        self.accepted = 0
        self._server: Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Condition()
        self.port = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/iris/ws"

    @property
    def seq(self) -> int:
        return self.log[-1]["seq"] if self.log else 0

    async def __aenter__(self) -> FakeIrisServer:
        self._server = await serve(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    # -- what tests call -------------------------------------------------------------------

    def script(self, *steps: Step) -> None:
        """Queue a turn to play on the next ``message.send``."""
        self.turns.append(list(steps))

    async def emit(self, frame: Frame) -> Frame:
        """Send a chat-scoped frame to every connection (and log it for resume)."""
        sent = {**frame, "chat_id": self.chat_id, "seq": self.seq + 1}
        self.log.append(sent)
        for connection in list(self.connections):
            with contextlib.suppress(ConnectionClosed):
                await connection.send(json.dumps(sent))
        return sent

    async def drop(self) -> None:
        """Cut every connection, no close handshake: what a network failure looks like."""
        for connection in list(self.connections):
            connection.transport.abort()
        await self.wait_until(lambda: not self.connections)

    async def wait_for(self, kind: str, count: int = 1, within: float = 5.0) -> Frame:
        """The ``count``-th frame of ``kind`` the app sent."""
        await self.wait_until(lambda: len(self.sent_by_app(kind)) >= count, within)
        return self.sent_by_app(kind)[count - 1]

    def sent_by_app(self, kind: str) -> list[Frame]:
        return [f for f in self.received if f.get("type") == kind]

    async def wait_until(self, predicate: Any, within: float = 5.0) -> None:
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(predicate)

    # -- the connection ---------------------------------------------------------------------

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _send_now(self, connection: ServerConnection, frame: Frame) -> None:
        """A connection-scoped frame: the chat's latest seq, not a new one."""
        await connection.send(json.dumps({**frame, "chat_id": self.chat_id, "seq": self.seq}))

    async def _handle(self, connection: ServerConnection) -> None:
        hello: Frame = {}
        try:
            header = (
                connection.request.headers.get("Authorization", "") if connection.request else ""
            )
            token = header.removeprefix("Bearer ").strip()
            if not token:
                hello = json.loads(await connection.recv())
                self.received.append(hello)
                token = str(hello.get("token", "")) if hello.get("type") == "hello" else ""
            if token not in self.tokens:
                await connection.close(4401, "unauthorized")
                return
            self.accepted += 1
            self.connections.add(connection)
            await self._notify()
            await self._send_now(connection, {"type": "ready"})
            if isinstance(hello.get("after_seq"), int):
                await self._resume(connection, hello["after_seq"])
            async for raw in connection:
                frame = json.loads(raw)
                self.received.append(frame)
                await self._on_frame(connection, frame)
                await self._notify()
        except ConnectionClosed:
            pass
        finally:
            self.connections.discard(connection)
            await self._notify()

    async def _on_frame(self, connection: ServerConnection, frame: Frame) -> None:
        kind = frame.get("type")
        if kind == "ping":
            await self._send_now(connection, {"type": "pong"})
        elif kind == "resume":
            await self._resume(connection, int(frame.get("after_seq", 0)))
        elif kind == "message.send" and self.turns:
            task = asyncio.create_task(self._play(self.turns.popleft()))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _resume(self, connection: ServerConnection, after_seq: int) -> None:
        if self.sync_on_resume:
            await self._send_now(connection, {"type": "sync", "messages": self._conversation()})
            return
        for frame in self.log:
            if frame["seq"] > after_seq:
                await connection.send(json.dumps(frame))

    def _conversation(self) -> list[Frame]:
        messages: dict[str, Frame] = {}
        for frame in self.log:
            if frame["type"] == "message.stop":
                messages[frame["message_id"]] = {
                    "message_id": frame["message_id"],
                    "role": "assistant",
                    "text": frame["final_text"],
                }
            elif frame["type"] == "message":
                messages[frame["message_id"]] = {
                    k: frame[k] for k in ("message_id", "role", "text") if k in frame
                }
        return list(messages.values())

    async def _play(self, steps: list[Step]) -> None:
        for step in steps:
            if isinstance(step, asyncio.Event):
                await step.wait()
            else:
                await self.emit(step)


def full_turn(
    answer: str = "The repo has **12 files**.\n\n- `src/` code\n- `tests/` tests",
) -> list[Frame]:
    """The typical turn of doc 05 §5.6: reasoning, a tool, commentary, then the answer."""
    return [
        {"type": "typing", "on": True},
        {"type": "message.start", "message_id": "m1", "role": "assistant"},
        {"type": "message.update", "message_id": "m1", "text": "Let me look"},
        {
            "type": "tool.start",
            "index": 1,
            "name": "terminal",
            "preview": "ls -la",
            "args": {"command": "ls -la", "cwd": "."},
        },
        {
            "type": "tool.end",
            "index": 1,
            "name": "terminal",
            "ok": True,
            "duration": 0.4,
            "output_preview": "total 12",
        },
        {"type": "commentary", "message_id": "m1", "text": "Let me look at the files."},
        {"type": "commentary", "message_id": "m2", "text": "Found 12 files."},
        {"type": "message.start", "message_id": "m3", "role": "assistant"},
        {"type": "message.update", "message_id": "m3", "text": answer[:12]},
        {
            "type": "message.stop",
            "message_id": "m3",
            "final_text": answer,
            "reasoning": "The user wants a summary.\nList the files first.",
            "model": "fake-model",
            "tokens": 42,
        },
        {"type": "typing", "on": False},
    ]

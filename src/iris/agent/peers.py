"""Remote A2A agents (``a2a_agents``) as the model's tools ``a2a_<name>``, on the ``a2a-sdk`` client.

A call sends the model's ``message`` to the agent (``message/stream`` when its card says it
streams) and folds what comes back (``PeerFold``): each status update and each piece of the
reply's text is the call's live progress (one line each, like an MCP tool's progress, so every
surface shows it); the tool's result is the agent's reply, or what it asks when it wants input
(``input-required``: the model can answer with ``task_id``), or its failure. ``context_id``
continues a conversation with the agent. A turn interrupted mid-call cancels the remote task
(``tasks/cancel``) before the call ends. ``a2a_*`` tools ask for approval as MCP tools do
(``tools.approval``).

The agent's card is read on the first call (and again after a failed one); ``headers`` go with
every request, the card's included; a call runs at most ``timeout`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)

from iris.agent.tools import Progress, Tool, ToolRegistry, ToolResult
from iris.config import A2aAgentConfig, Config

log = logging.getLogger(__name__)

NOTE_CHARS = 200  # a progress line: the newest text of the reply
CANCEL_WAIT = 3.0  # seconds an interrupted call waits for the remote cancel
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "What to ask or tell the agent."},
        "context_id": {
            "type": "string",
            "description": "Continue an earlier conversation with the agent (its context_id).",
        },
        "task_id": {
            "type": "string",
            "description": "Answer a task of the agent's that asked for input (its task_id).",
        },
    },
    "required": ["message"],
}
_ENDED: set[int] = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
    TaskState.TASK_STATE_INPUT_REQUIRED,
    TaskState.TASK_STATE_AUTH_REQUIRED,
}
_STATE_WORDS: dict[int, str] = {
    TaskState.TASK_STATE_SUBMITTED: "submitted",
    TaskState.TASK_STATE_WORKING: "working",
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
}


def _text(message: Message) -> str:
    return "\n".join(p.text for p in message.parts if p.WhichOneof("content") == "text")


@dataclass
class PeerFold:
    """What an agent said so far, from the events of one call (the pure core)."""

    task_id: str = ""
    context_id: str = ""
    state: int = TaskState.TASK_STATE_UNSPECIFIED
    artifacts: dict[str, str] = field(default_factory=dict[str, str])
    said: str = ""  # the status message (or a whole reply as a message)

    @property
    def reply(self) -> str:
        return "\n\n".join(t for t in self.artifacts.values() if t)

    @property
    def over(self) -> bool:
        return self.state in _ENDED

    def feed(self, event: StreamResponse) -> str | None:
        """Take one event; a progress line when it says something new."""
        which = event.WhichOneof("payload")
        if which == "task":
            task = event.task
            self.task_id, self.context_id, self.state = task.id, task.context_id, task.status.state
            for artifact in task.artifacts:
                self.artifacts[artifact.artifact_id] = "".join(p.text for p in artifact.parts)
            self.said = _text(task.status.message) or self.said
            return None
        if which == "message":
            self.said, self.state = _text(event.message), TaskState.TASK_STATE_COMPLETED
            self.context_id = event.message.context_id or self.context_id
            return None
        if which == "status_update":
            update = event.status_update
            self.task_id, self.context_id = update.task_id, update.context_id
            self.state = update.status.state
            self.said = _text(update.status.message) or self.said
            return _STATE_WORDS.get(self.state, "working")
        if which == "artifact_update":
            return self._artifact(event)
        return None

    def _artifact(self, event: StreamResponse) -> str | None:
        update = event.artifact_update
        self.task_id = update.task_id or self.task_id
        piece = "".join(p.text for p in update.artifact.parts)
        key = update.artifact.artifact_id
        before = self.artifacts.get(key, "")
        self.artifacts[key] = before + piece if update.append else piece
        if self.artifacts[key] == before:
            return None  # nothing new (a closing chunk)
        tail = " ".join(self.reply.split())[-NOTE_CHARS:]
        return tail or None

    def result(self) -> ToolResult:
        """The tool's result for the model."""
        ids = f"[context_id: {self.context_id}" + (
            f", task_id: {self.task_id}]" if self.task_id else "]"
        )
        word = _STATE_WORDS.get(self.state, "ended")
        if self.state == TaskState.TASK_STATE_COMPLETED:
            return ToolResult(True, f"{self.reply or self.said}\n\n{ids}")
        if self.state in (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED):
            asked = self.said or "(no question given)"
            return ToolResult(
                True,
                f"The agent needs {word.split('-')[0]}: {asked}\n{self.reply}\n\n{ids}".strip(),
            )
        return ToolResult(
            False, f"error: the agent's task {word}: {self.said or self.reply}\n\n{ids}"
        )


class Peer:
    """One remote agent: its client (made on first use) and its tool."""

    def __init__(self, name: str, config: A2aAgentConfig) -> None:
        self.name = name
        self.config = config
        self._http: httpx.AsyncClient | None = None
        self._client: Client | None = None

    def tool(self) -> Tool:
        host = httpx.URL(self.config.url).host
        return Tool(
            f"a2a_{self.name}",
            f"Ask the remote agent '{self.name}' ({host}, over A2A). It answers in text; "
            "its progress shows while it works.",
            PARAMETERS,
            self.call,
            progress_every=0.0,
            where=lambda _chat: f"by the remote agent {self.name} at {host}",
        )

    async def call(self, args: dict[str, Any], progress: Progress) -> ToolResult:
        text = args.get("message")
        if not isinstance(text, str) or not text.strip():
            return ToolResult(False, "error: message must be a non-empty string")
        try:
            client = await self._connect()
        except Exception as exc:  # the card could not be read: the call fails, the next retries
            return ToolResult(False, f"error: the agent {self.name} is unreachable: {exc}")
        fold = PeerFold()
        try:
            async with asyncio.timeout(self.config.timeout):
                await self._stream(client, _request(text, args), fold, progress)
        except asyncio.CancelledError:
            await self._cancel(client, fold.task_id)
            raise
        except TimeoutError:
            await self._cancel(client, fold.task_id)
            return ToolResult(False, f"error: the agent ran past {self.config.timeout:g} s")
        except Exception as exc:
            await self._forget()
            return ToolResult(False, f"error: the agent {self.name} failed: {exc}")
        return fold.result()

    async def _stream(
        self, client: Client, request: SendMessageRequest, fold: PeerFold, progress: Progress
    ) -> None:
        async for event in client.send_message(request):
            note = fold.feed(event)
            if note is not None:
                progress(note)
            if fold.over:
                return

    async def _connect(self) -> Client:
        if self._client is None:
            self._http = httpx.AsyncClient(headers=self.config.headers, timeout=self.config.timeout)
            settings = ClientConfig(httpx_client=self._http, streaming=True)
            try:
                self._client = await create_client(self.config.url, client_config=settings)
            except BaseException:
                await self._forget()
                raise
        return self._client

    async def _cancel(self, client: Client, task_id: str) -> None:
        """Cancel the remote task, waiting ``CANCEL_WAIT`` at most."""
        if not task_id:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.cancel_task(CancelTaskRequest(id=task_id)), CANCEL_WAIT)

    async def _forget(self) -> None:
        client, http, self._client, self._http = self._client, self._http, None, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        if http is not None:
            await http.aclose()

    async def aclose(self) -> None:
        await self._forget()


class Peers:
    """Every configured remote agent, its tool in the agent's registry."""

    def __init__(self, config: Config, registry: ToolRegistry) -> None:
        self.peers = [Peer(name, agent) for name, agent in config.a2a_agents.items()]
        for peer in self.peers:
            registry.add(peer.tool())

    async def aclose(self) -> None:
        for peer in self.peers:
            await peer.aclose()


def _request(text: str, args: dict[str, Any]) -> SendMessageRequest:
    message = Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        context_id=str(args.get("context_id") or ""),
        task_id=str(args.get("task_id") or ""),
    )
    return SendMessageRequest(message=message)

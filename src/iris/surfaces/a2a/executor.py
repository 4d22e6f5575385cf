"""An A2A task is an Iris turn in the iris chat of its ``contextId``.

``IrisExecutor`` is the ``a2a-sdk``'s ``AgentExecutor``: a message starts a turn in the chat
``a2a-<contextId>`` through that chat's room, as a device's ``message.send`` does (devices on
the chat see it; one turn per chat; a slot under ``server.max_turns``). The task says
``working`` at once, then the reply's text streams as the artifact ``reply`` (each update
appends what the text grew by; a rewritten text replaces it), and the task ends
``completed`` with the whole reply as its status message, or ``failed`` with the turn's error.

A tool that needs approval puts the task in ``input-required``: its status message says what
waits (text, and a data part ``{approval_id, name, args, preview, decisions}``), and the turn
keeps waiting. The client's next message on the task answers (``once``/``chat``/``deny``, a
yes or a no, or a data part ``{"decision": ...}``) and the task goes on from where it was.
``tasks/cancel`` interrupts the turn at once (its text so far stays in the chat) and the task
ends ``canceled``; sent to a process that does not run the task, it stops the turn through the
turn owners' inbox (as a device's cancel does) and the process running it ends the task
``canceled``.

Any process can serve any task (a shared store): the task's metadata names its chat and the
seq its turn started after (``iris_chat``, ``iris_from``) and the approval it waits for
(``iris_waiting``). Nothing is held in memory between two requests: the answer to an approval,
on whichever process it reaches, is written through the approvals broker (shared too) and the
turn, which goes on where it runs, is followed from the chat's frame log; ``watch`` does the
same for ``tasks/resubscribe`` of a task another process runs. The frames are folded from the
turn's start and only what the task's stored reply lacks is streamed: no gap, no repeat.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any, cast

from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Role, Task, TaskState
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value

from iris.agent.approvals import DECISIONS
from iris.fanout.subscription import Subscription
from iris.protocol import inbound
from iris.surfaces.a2a.content import Content, ContentError, content, decision
from iris.surfaces.mcp_server.fold import ReplyFold, Waiting, growth
from iris.surfaces.socket.endpoint import SocketSurface
from iris.surfaces.socket.room import ChatRoom

log = logging.getLogger(__name__)

ARTIFACT = "reply"
SLOT_KEY = "a2a"
CHAT_KEY, FROM_KEY, WAITING_KEY = "iris_chat", "iris_from", "iris_waiting"  # task metadata


def chat_for(context_id: str) -> str:
    """The iris chat of an A2A context (a digest when the id is not a valid chat id)."""
    chat_id = f"a2a-{context_id}"
    if inbound.valid_chat_id(chat_id):
        return chat_id
    return "a2a-" + hashlib.sha256(context_id.encode()).hexdigest()[:32]


@dataclass
class _Following:
    """A turn an A2A task follows: its room, its frames, what was streamed of it."""

    room: ChatRoom
    subscription: Subscription
    fold: ReplyFold = field(default_factory=ReplyFold)
    streamed: str = ""  # the artifact's text so far
    waiting: Waiting | None = None
    catching_up: bool = False  # replaying frames the task's stored reply already holds
    owner: bool = True  # this request started the turn (a cancel here stops it)


class IrisExecutor(AgentExecutor):
    def __init__(self, iris: SocketSurface) -> None:
        self.iris = iris
        self.runtime = iris.runtime

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        if context.current_task is None:  # a new task: the SDK wants the Task before updates
            history = [context.message] if context.message is not None else []
            task = new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=history)
            await event_queue.enqueue_event(task)
        waiting = context.current_task
        if waiting is not None and waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            following = self._from_log(waiting, owner=True)
            if following is not None and following.waiting is not None:
                await self._answer(following, context.message, updater)
                return
            if following is not None:
                self.iris.hub.unsubscribe(following.subscription)
        try:
            said = content(_message(context), self.runtime.config.attachments.max_bytes)
        except ContentError as exc:
            await updater.reject(_agent(updater, str(exc)))
            return
        chat_id = chat_for(context_id)
        following = self._start(chat_id, said)
        if following is None:
            await updater.reject(
                _agent(updater, "a turn is running in this context; wait or cancel it")
            )
            return
        start = {CHAT_KEY: chat_id, FROM_KEY: following.subscription.position}
        await updater.update_status(TaskState.TASK_STATE_WORKING, metadata=start)
        await self._follow(following, updater)

    def follows(self, task: Task) -> bool:
        """Does the task name the turn it is (a task this version started)?"""
        meta = _metadata(task)
        return isinstance(meta.get(CHAT_KEY), str) and isinstance(meta.get(FROM_KEY), int | float)

    async def watch(self, task: Task, event_queue: EventQueue) -> bool:
        """Follow a task another process runs, from the chat's shared frame log, until its
        turn ends or waits (``tasks/resubscribe``); False if the task names no turn."""
        following = self._from_log(task, owner=False)
        if following is None:
            return False
        await self._follow(following, TaskUpdater(event_queue, task.id, task.context_id))
        return True

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        self.iris.room(chat_for(context_id)).cancel()
        await TaskUpdater(event_queue, task_id, context_id).cancel()

    def interrupt(self, task: Task) -> bool:
        """Stop the turn of a task another process runs (``tasks/cancel`` reaching a process
        that does not hold it): through the turn owners' inbox, as a device's cancel does; the
        owner ends the task ``canceled``. False if the task names no turn."""
        chat_id = _metadata(task).get(CHAT_KEY)
        if not self.follows(task) or not isinstance(chat_id, str):
            return False
        self.iris.room(chat_id).cancel()
        return True

    def _from_log(self, task: Task, *, owner: bool) -> _Following | None:
        """A task's turn followed from its chat's log, from the seq the turn started after."""
        meta = _metadata(task)
        chat_id, start = meta.get(CHAT_KEY), meta.get(FROM_KEY)
        if not isinstance(chat_id, str) or not isinstance(start, int | float):
            return None
        subscription = self.iris.hub.subscribe(chat_id)
        subscription.resume(int(start))
        parts = (p for a in task.artifacts if a.artifact_id == ARTIFACT for p in a.parts)
        streamed = "".join(p.text for p in parts)
        following = _Following(
            self.iris.room(chat_id), subscription, streamed=streamed, catching_up=True, owner=owner
        )
        waits = meta.get(WAITING_KEY)
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and isinstance(waits, dict):
            following.waiting = _waiting(cast("dict[str, Any]", waits))
        return following

    def _start(self, chat_id: str, said: Content) -> _Following | None:
        """The turn started in ``chat_id``; None when the chat is busy or no slot is free."""
        room = self.iris.room(chat_id)
        subscription = self.iris.hub.subscribe(chat_id)
        slot = self.runtime.turns.acquire(SLOT_KEY, None)
        started = False
        try:
            if slot is not None:
                started = room.send(said.text, origin=subscription, slot=slot, files=said.files)
        finally:
            if not started:
                if slot is not None:
                    slot.release()
                self.iris.hub.unsubscribe(subscription)
        return _Following(room, subscription) if started else None

    async def _answer(
        self, following: _Following, message: Message | None, updater: TaskUpdater
    ) -> None:
        """The client's answer to the approval the task waits for; the task goes on."""
        waiting = following.waiting
        assert waiting is not None
        approvals = self.runtime.approvals
        if await approvals.resolution(waiting.approval_id) is not None:
            # Answered meanwhile (a device, the timeout): any message goes on with the task.
            following.waiting = None
            await updater.start_work()
            await self._follow(following, updater)
            return
        said = decision(message)
        if said is None:
            self.iris.hub.unsubscribe(following.subscription)
            await updater.requires_input(_asking(updater, waiting, "Answer once, chat or deny."))
            return
        session = following.room.session
        await approvals.respond(waiting.approval_id, said, "a2a", chat_id=session)
        following.waiting = None
        await updater.start_work()
        await self._follow(following, updater)

    async def _follow(self, following: _Following, updater: TaskUpdater) -> None:
        """Stream the turn into the task until it ends or waits for an approval (the answer,
        on any process, follows the turn again from the log)."""
        try:
            while not following.fold.done:
                told = following.fold.feed(await following.subscription.get())
                if isinstance(told, Waiting):
                    if await self.runtime.approvals.resolution(told.approval_id) is not None:
                        continue  # answered already (a replay of the log, a device)
                    waits = {WAITING_KEY: _waiting_data(told)}
                    await updater.update_status(
                        TaskState.TASK_STATE_INPUT_REQUIRED, _asking(updater, told), metadata=waits
                    )
                    return
                if told is not None:
                    await self._stream(following, updater, last=False)
            await self._stream(following, updater, last=True)
            if following.owner and following.room.canceled:
                # Stopped by a tasks/cancel another process received: it wrote canceled.
                await updater.cancel(_agent(updater, following.fold.text))
                return
            await self._end(following.fold, updater)
        except asyncio.CancelledError:
            if following.owner:  # tasks/cancel: the turn stops within a round of the loop
                following.room.cancel()
            raise
        finally:
            self.iris.hub.unsubscribe(following.subscription)

    async def _stream(self, following: _Following, updater: TaskUpdater, *, last: bool) -> None:
        """What the reply's text grew by, as an artifact update (all of it when rewritten)."""
        before, text = following.streamed, following.fold.text
        if following.catching_up:
            if before.startswith(text) and not last:
                return  # the stored reply already has this much
            following.catching_up = False
        piece, grew = growth(before, text)
        if not piece and not last:
            return
        following.streamed = text
        await updater.add_artifact(
            [Part(text=piece)],
            artifact_id=ARTIFACT,
            name=ARTIFACT,
            append=grew and bool(before),
            last_chunk=last,
        )

    async def _end(self, fold: ReplyFold, updater: TaskUpdater) -> None:
        if fold.error is not None:
            code, message = fold.error
            await updater.failed(_agent(updater, f"{code}: {message}"))
        else:
            await updater.complete(_agent(updater, fold.text))


def _message(context: RequestContext) -> Message:
    return context.message if context.message is not None else Message()


def _agent(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([Part(text=text)])


def _metadata(task: Task) -> dict[str, Any]:
    return MessageToDict(task.metadata) if task.HasField("metadata") else {}


def _waiting_data(waiting: Waiting) -> dict[str, Any]:
    return {
        "approval_id": waiting.approval_id,
        "name": waiting.name,
        "args": waiting.args,
        "preview": waiting.preview,
        "expires_at": waiting.expires_at,
    }


def _waiting(data: dict[str, Any]) -> Waiting:
    return Waiting(
        str(data.get("approval_id", "")),
        str(data.get("name", "")),
        dict(data.get("args") or {}),
        str(data.get("preview", "")),
        float(data.get("expires_at", 0.0)),
    )


def _asking(updater: TaskUpdater, waiting: Waiting, more: str = "") -> Message:
    """The ``input-required`` message: what waits, for a person and for a program."""
    data = {**_waiting_data(waiting), "decisions": list(DECISIONS)}
    text = f"Iris wants to run {waiting.name}: {waiting.preview}\nApprove? (once, chat or deny)"
    parts = [Part(text=f"{text}\n{more}".strip()), Part(data=ParseDict(data, Value()))]
    message = updater.new_agent_message(parts)
    message.role = Role.ROLE_AGENT
    return message

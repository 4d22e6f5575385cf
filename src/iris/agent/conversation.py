"""One chat's turn lifecycle: controls -> transcript -> ``TurnRequest`` -> run -> keep.

Every surface that keeps a chat's history (the socket room, the chat platforms, the REPL, the
chat commands) goes through a ``Conversation``: the session key is the caller's (``iris:<chat>``,
``<platform>:<chat>[:<thread>]``, the REPL's own), and so are the stores it is given (the
runtime's, or the REPL's memory). A turn is::

    chat = Conversation(agent, sessions, controls, key)
    exchange = await chat.begin(UserMessage("hi"), TurnOptions(stream=True, metadata=...))
    async with exchange.turn as turn:      # the agent's turn: drive it, show it
        end = ...                          # its TurnEnded | TurnFailed
    await exchange.keep(end, shown)        # the compaction cut, the reply, the usage

**When the user's message is saved: in ``begin``, before the model is asked.** A user who
reloads mid-turn (another device, the web app's history, another process with a shared store)
sees the question that is being answered, and a server killed mid-reply still has it (its
repair, ``repair``, adds only the reply the devices saw). A turn that cannot save it does not
start: ``begin`` raises ``StoreUnavailable`` and the model is never called for a message
nobody could keep. Nothing of the chat's comes between a turn's question and what the turn
keeps (each surface runs one turn of a session at a time), so the history alternates
question -> what the turn left (``iris.agent.history.kept``) even when the turn fails; a turn
that failed before any text, or whose surface crashed, leaves its question alone, and the
next request then carries two user messages in a row (which the chat APIs accept, as they do
the chat platforms' bursts) instead of losing what the user asked.

**One log level per failure** (the store is down, each time):

- the turn cannot start (controls, transcript or question not read or saved): raised from
  ``begin``; the surface tells the user and logs it at ``warning``;
- the reply is not kept (``keep``): ``error`` here (the model will not see what the user read),
  then raised so the surface can end the turn saying so;
- a message that only joins the history (``remember``) is not kept: ``error``;
- the compaction cut is not kept: ``warning`` (the next turn compacts again: nothing is lost);
- the usage is not kept: ``warning`` (only ``/status`` misses it);
- a crashed turn's history is not repaired (``repair``): ``error``.

What the next features change goes through here: the user's message is a typed value
(``UserMessage``; ``message()`` is the one place it becomes chat-format content: with files,
the content parts ``iris.agent.attachments`` made, and ``kept()`` what the history keeps); the
session key is the caller's (a thread's own conversation is a key with the thread in it); and
each surface keeps its ``Conversation`` for as long as the chat's session (the socket room per
chat, the chat runner per conversation key, the REPL per run), so what lasts for a chat's
session (a "chat"-scoped approval) belongs on it, or with its controls when it must hold on
every process.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from iris.agent.attachments import Prepared, without_old_images
from iris.agent.context import Compaction, history
from iris.agent.core import Agent, Turn, TurnRequest
from iris.agent.elicitation import Elicitations
from iris.agent.history import kept
from iris.errors import StoreUnavailable
from iris.events import TerminalEvent, TurnEnded
from iris.state.approvals import Approvals
from iris.state.controls import ChatControls, Controls, Field
from iris.state.sessions import Sessions, Transcript

__all__ = ["ContextUse", "Conversation", "Exchange", "TurnOptions", "UserMessage"]

log = logging.getLogger(__name__)

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class UserMessage:
    """What the user sent: its text and, when files came with it, what they became
    (``iris.agent.attachments.prepare``: content parts for the model, placeholders for the
    history, a line for the user about each file the model did not get)."""

    text: str
    attached: Prepared | None = None

    def message(self) -> Message:
        """The chat-format message the model gets (its image parts included)."""
        if self.attached is not None:
            return self.attached.message()
        return {"role": "user", "content": self.text}

    def kept(self) -> Message:
        """What the history keeps once a turn answers it: its images as placeholders (a
        stored image would go with every later request)."""
        return self.attached.kept() if self.attached is not None else self.message()

    @property
    def notes(self) -> list[str]:
        """One line per file the model did not get whole, for the user."""
        return self.attached.notes if self.attached is not None else []


@dataclass(frozen=True, slots=True)
class TurnOptions:
    """What the surface asks of a turn besides the history (the rest is the chat's controls)."""

    stream: bool = True
    metadata: Mapping[str, Any] = field(default_factory=dict[str, Any])
    allow_terminal: bool = True  # only allowed users reach a conversation
    show_compaction: bool = False  # say so (Commentary) when older turns were compacted


@dataclass(frozen=True, slots=True)
class ContextUse:
    """How much of the model's window the chat's history takes (for ``/status``)."""

    model: str
    used: int  # tokens, estimated, of the system prompt, the history and the tool schemas
    window: int
    reserve: int  # kept for the reply
    last_usage: dict[str, int]  # the last reply's, as the provider counted it


class Conversation:
    """One chat (``session``, the caller's key) over its history and its controls."""

    def __init__(
        self,
        agent: Agent,
        sessions: Sessions,
        controls: ChatControls,
        session: str,
        approvals: Approvals | None = None,
        elicitations: Elicitations | None = None,
    ) -> None:
        self.agent = agent
        self.sessions = sessions
        self.kept_controls = controls
        self.session = session
        # Who approves the chat's tools that ask (``tools.approval``), for this session: None
        # where nobody can be asked, so such a tool is refused.
        self.approvals = approvals
        # Who answers an MCP server's request for input: None where nobody can be asked.
        self.elicitations = elicitations

    # -- controls ----------------------------------------------------------------------------
    async def controls(self) -> Controls:
        """The chat's controls (raises ``StoreUnavailable``)."""
        return await self.kept_controls.load(self.session)

    async def save(self, controls: Controls, *fields: Field) -> None:
        """Keep ``fields`` of ``controls`` for the chat (raises ``StoreUnavailable``)."""
        await self.kept_controls.save(self.session, controls, *fields)

    # -- a turn ------------------------------------------------------------------------------
    async def begin(
        self, user: UserMessage, options: TurnOptions, controls: Controls | None = None
    ) -> Exchange:
        """Read the history, save ``user`` after it and build the turn (not started: enter
        ``exchange.turn``). ``controls``: the chat's, when the caller read them already.
        Raises ``StoreUnavailable``: no turn, and the question is not kept."""
        if controls is None:
            controls = await self.controls()
        transcript = await self.sessions.transcript(self.session)
        # The rule: saved before the model is asked (its images as placeholders).
        await self.sessions.append(self.session, [user.kept()])
        request = TurnRequest(
            # A burst's messages keep their images until a reply answers them; older ones go.
            messages=[*without_old_images(history(transcript)), user.message()],
            stream=options.stream,
            model=controls.model,
            fit_context=True,
            allow_terminal=options.allow_terminal,
            show_compaction=options.show_compaction,
            metadata=dict(options.metadata),
            approvals=self.approvals,
            elicitations=self.elicitations,
            chat_id=self.session,
        )
        return Exchange(self, controls, transcript, self.agent.run(request))

    async def remember(self, user: UserMessage) -> None:
        """``user`` joins the history without a turn of its own (a message overtaken by a newer
        one before its turn began: the newer one's turn sees it, images included)."""
        try:
            await self.sessions.append(self.session, [user.message()])
        except StoreUnavailable as exc:
            log.error("message of %s not kept: %s", self.session, exc.message)

    async def repair(self, question: str | None, shown: str) -> None:
        """Keep what devices were shown of a turn the server stopped during (a crash, a lost
        owner): its question (``question``, when the turn had no time to save it) and the
        reply cut where it stopped; nothing when the turn kept its reply already."""
        try:
            await self._repair(question, shown)
        except StoreUnavailable as exc:
            log.error("history of %s not repaired after a crash: %s", self.session, exc.message)

    async def _repair(self, question: str | None, shown: str) -> None:
        repaired = kept(None, shown)
        last = await self.sessions.last(self.session)
        # The reply is there already when the turn kept it but its last frames were lost.
        done = [shown, *(m["content"] for m in repaired)]
        if last is not None and last.get("role") == "user":
            added: list[Message] = []  # the turn's question was saved when it began
        elif question is not None and not (last and last.get("content") in done):
            added = [UserMessage(question).message()]
        else:
            return
        await self.sessions.append(self.session, [*added, *repaired])

    # -- commands ----------------------------------------------------------------------------
    async def new(self) -> None:
        """Start afresh: the model no longer sees the history (it stays in the store), and
        the tools allowed "in this chat" ask again."""
        await self.sessions.cut(self.session)
        if self.approvals is not None:
            await self.approvals.new_session(self.session)

    async def compact(self) -> Compaction | None:
        """Compact the history now (``/compact``) and keep the cut; what was replaced, or
        None when there was nothing to compact."""
        transcript = await self.sessions.transcript(self.session)
        controls = await self.controls()
        head = _head(self.agent)
        _, compaction = await self.agent.compact(
            [*head, *history(transcript)],
            self.agent.tools.schemas(),
            model=controls.model,
            force=True,
            head=len(head),
        )
        if compaction is not None:
            after = transcript.cut_after(compaction.replaced)
            await self.sessions.cut(self.session, compaction.summary, after=after)
        return compaction

    async def context_use(self) -> ContextUse:
        """What the next request would take of the model's window (``/status``)."""
        transcript = await self.sessions.transcript(self.session)
        controls = await self.controls()
        fit = self.agent.context_window(controls.model)
        messages = [*_head(self.agent), *history(transcript)]
        used = await fit.count(messages, self.agent.tools.schemas())
        return ContextUse(fit.model, used, fit.window, fit.reserve, controls.last_usage)


class Exchange:
    """One turn of a conversation, from its question (saved) to what it keeps."""

    def __init__(
        self, chat: Conversation, controls: Controls, transcript: Transcript, turn: Turn
    ) -> None:
        self.chat = chat
        self.controls = controls  # the chat's, as the turn began
        self.transcript = transcript  # the history the turn was sent, before its question
        self.turn = turn
        self.unkept: StoreUnavailable | None = None  # why ``keep`` could not keep the reply

    async def keep(self, end: TerminalEvent | None, shown: str = "") -> bool:
        """Keep what the turn left: the cut its compaction made, the messages it added after
        its question (``kept(end, shown)``), its usage. Returns whether the reply was kept:
        when the store refused it, that is logged here (once, as an error), the failure is
        ``unkept`` and the usage is not recorded; the cut's and the usage's failures are
        logged only. Every surface calls it once, after the turn."""
        await self._keep_cut()
        chat = self.chat
        try:
            await chat.sessions.append(chat.session, kept(end, shown))
        except StoreUnavailable as exc:
            log.error("reply of %s not kept: %s", chat.session, exc.message)
            self.unkept = exc
            return False
        await self._keep_usage(end)
        return True

    async def _keep_cut(self) -> None:
        """Record what the turn's compaction replaced, so the next turn starts from it."""
        compaction = self.turn.compaction
        if compaction is None:
            return
        chat = self.chat
        after = self.transcript.cut_after(compaction.replaced)
        try:
            await chat.sessions.cut(chat.session, compaction.summary, after=after)
        except StoreUnavailable as exc:  # the next turn compacts again: nothing is lost
            log.warning("compaction of %s not kept: %s", chat.session, exc.message)

    async def _keep_usage(self, end: TerminalEvent | None) -> None:
        """Record the usage of a finished turn, for ``/status``."""
        if not isinstance(end, TurnEnded):
            return
        self.controls.last_usage = dict(end.usage)
        try:
            await self.chat.save(self.controls, "last_usage")
        except StoreUnavailable as exc:  # the reply is whole and kept; only /status misses it
            log.warning("usage of %s not kept: %s", self.chat.session, exc.message)


def _head(agent: Agent) -> list[Message]:
    """The system prompt the agent puts before every history."""
    prompt = agent.config.model.system_prompt
    return [{"role": "system", "content": prompt}] if prompt else []

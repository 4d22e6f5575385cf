"""The iris chats as an outside assistant uses them: list, read, send, stop, approve.

``ChatDesk`` is what MCP server mode's six tools call (``iris.surfaces.mcp_server.chat_tools``).
It sees exactly what a device token sees on the iris socket, nothing more: the iris chats
(sessions ``iris:<chat_id>``) and their approvals; a chat of another platform, or an approval
asked there, is unknown to it. A message goes through the chat's room, as a device's
``message.send`` does: every device on the chat sees the turn, one turn runs per chat, the
turn takes a slot under ``server.max_turns`` and ``platforms.iris.max_turns_per_token``.

Every refusal is a ``DeskError`` with a code (the tool's error says it); answers are plain
dicts of str/int/float/bool.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from iris.agent.approvals import DECISIONS
from iris.errors import IrisError
from iris.fanout.subscription import Subscription
from iris.protocol import inbound
from iris.protocol.frames import approval_request
from iris.surfaces.mcp_server.fold import ReplyFold, Waiting
from iris.surfaces.socket import chats
from iris.surfaces.socket.endpoint import SocketSurface
from iris.surfaces.socket.room import ChatRoom

MAX_PAGE = 200  # messages one chat_read returns at most
MAX_READ = 10_000  # messages of a chat's history a read looks through
SEND_TIMEOUT = 600.0  # seconds chat_send waits for the turn's end before it answers
CALLER_HEADER = "x-iris-caller"  # where the HTTP endpoint names the caller it authenticated


class DeskError(IrisError):
    """A request the desk refuses: ``code`` says why, ``message`` for a person."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Caller:
    """Who calls: ``name`` (a paired device's, ``api`` for the API key, ``local`` on stdio)
    answers approvals as ``by``; ``key`` is its bound under ``max_turns_per_token``."""

    name: str
    key: str


Progress = Callable[[str], Awaitable[None]]


class ChatDesk:
    def __init__(self, surface: SocketSurface) -> None:
        self.surface = surface
        self.runtime = surface.runtime

    async def chats(self) -> dict[str, Any]:
        """The iris chats, newest first: ``{chats: [{chat_id, title, updated}]}``."""
        found = await self.runtime.sessions.summaries(chats.SESSION_PREFIX, chats.MAX_CHATS)
        return chats.listing(found)

    async def read(self, chat_id: str, before: int | None, limit: int) -> dict[str, Any]:
        """A page of the chat's messages, oldest first, ending before message ``before``
        (the newest page without it); ``next_before`` pages back, None at the start."""
        _check_chat(chat_id)
        if limit < 1 or limit > MAX_PAGE:
            raise DeskError("bad_limit", f"limit must be 1 to {MAX_PAGE}")
        history = await self.runtime.sessions.history(chats.session_key(chat_id), MAX_READ)
        shown = [m for m in (_shown(m) for m in history) if m is not None]
        end = len(shown) if before is None else max(0, min(before, len(shown)))
        start = max(0, end - limit)
        messages = [{"index": i, **shown[i]} for i in range(start, end)]
        return {
            "chat_id": chat_id,
            "messages": messages,
            "total": len(shown),
            "next_before": start if start > 0 else None,
        }

    def stop(self, chat_id: str) -> dict[str, Any]:
        """Interrupt the chat's running turn (here, or through its owner's process)."""
        _check_chat(chat_id)
        if not self.surface.room(chat_id).cancel():
            raise DeskError("no_turn", f"no turn is running in chat {chat_id!r}")
        return {"chat_id": chat_id, "stopped": True}

    async def approvals(self, chat_id: str | None) -> dict[str, Any]:
        """The approvals that wait, in one chat or in every iris chat."""
        if chat_id is not None:
            _check_chat(chat_id)
            ids = [chat_id]
        else:
            listed = (await self.chats())["chats"]
            ids = [str(c["chat_id"]) for c in listed]
        approvals = self.runtime.approvals
        found: list[dict[str, Any]] = []
        for one in ids:
            for request in await approvals.pending(chats.session_key(one)):
                frame = cast(dict[str, Any], approval_request(request))
                fields = {k: v for k, v in frame.items() if k != "type"}
                found.append({"chat_id": one, **fields})
        return {"approvals": found}

    async def respond(self, approval_id: str, decision: str, caller: Caller) -> dict[str, Any]:
        """Answer an approval of an iris chat: ``once``, ``chat`` or ``deny``."""
        if decision not in DECISIONS:
            raise DeskError("bad_decision", f"decision must be one of {', '.join(DECISIONS)}")
        approvals = self.runtime.approvals
        chat = await approvals.chat_of(approval_id)
        if chat is None or not chat.startswith(chats.SESSION_PREFIX):
            raise DeskError("approval_unknown", f"no approval {approval_id!r} waits")
        result = await approvals.respond(approval_id, decision, caller.name, chat_id=chat)
        if result == "already_decided":
            found = await approvals.resolution(approval_id)
            how = f"{found.decision} by {found.by}" if found is not None else "before"
            raise DeskError("approval_decided", f"already decided: {how}")
        if result == "unknown":
            raise DeskError("approval_unknown", f"no approval {approval_id!r} waits")
        return {"approval_id": approval_id, "decision": decision, "by": caller.name}

    async def send(
        self, chat_id: str | None, text: str, caller: Caller, progress: Progress
    ) -> dict[str, Any]:
        """Send ``text`` to the chat (a new one without ``chat_id``) and wait for the reply;
        ``progress`` hears the reply's text as it grows and each approval that waits."""
        chat_id = chat_id or f"mcp-{uuid.uuid4().hex[:12]}"
        _check_chat(chat_id)
        _check_text(text, self.surface.settings.max_text)
        hub = self.surface.hub
        room = self.surface.room(chat_id)
        subscription = hub.subscribe(chat_id)
        try:
            self._start(room, text, caller, subscription)
            fold = ReplyFold()
            async with asyncio.timeout(SEND_TIMEOUT):
                while not fold.done:
                    told = fold.feed(await subscription.get())
                    if told is not None:
                        await progress(told.line() if isinstance(told, Waiting) else told)
        except asyncio.CancelledError:
            room.cancel()  # the caller cancelled its call: the turn stops as /stop stops it
            raise
        finally:
            hub.unsubscribe(subscription)
        return _answer(chat_id, fold)

    def _start(self, room: ChatRoom, text: str, caller: Caller, subscription: Subscription) -> None:
        settings, turns = self.surface.settings, self.runtime.turns
        slot = turns.acquire(caller.key, settings.max_turns_per_token)
        if slot is None:
            raise DeskError("busy", "too many turns are running; try again shortly")
        try:
            started = room.send(text, origin=subscription, slot=slot)
        except BaseException:
            slot.release()
            raise
        if not started:
            slot.release()
            raise DeskError("turn_active", "a turn is running in this chat; stop it or wait")


def _answer(chat_id: str, fold: ReplyFold) -> dict[str, Any]:
    answer: dict[str, Any] = {"chat_id": chat_id, "reply": fold.text}
    if fold.error is not None:
        answer["error"] = {"code": fold.error[0], "message": fold.error[1]}
    return answer


def _check_chat(chat_id: str) -> None:
    if not inbound.valid_chat_id(chat_id):
        raise DeskError("bad_chat_id", "chat_id must be 1-128 of A-Z a-z 0-9 . _ : @ -")


def _check_text(text: str, most: int) -> None:
    if not text.strip() or not inbound.valid_text(text):
        raise DeskError("bad_text", "text must be non-empty UTF-8")
    if len(text) > most:
        raise DeskError("too_long", f"text is over {most} characters")


def _shown(message: dict[str, Any]) -> dict[str, str] | None:
    """A history message as a reader sees it: user and assistant text (tools' turns not)."""
    role = message.get("role")
    if role not in ("user", "assistant"):
        return None
    content: Any = message.get("content")
    if isinstance(content, list):
        parts = cast(list[Any], content)
        content = " ".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
    if not isinstance(content, str) or not content:
        return None
    return {"role": str(role), "text": content}

"""One tool call of a turn, through the gate every call passes before it runs.

Built-in, MCP and A2A tools alike (``ToolCalls.run``):

- arguments that are not JSON, a name this round did not offer (a model may call any name it
  likes), ``terminal`` for a user who is not allowed, arguments that fail the tool's schema →
  an error result the model reads, and the tool never runs;
- a tool that asks (``tools.approval``, or ``TurnRequest.ask_also``) waits for a person's answer
  through the turn's approvals broker; where nobody can be asked it is refused, never run
  unasked; an approval nobody answered in a turn with ``unanswered_ends`` ends the turn
  (``Unanswered``);
- while it runs, its progress notes (at most one per ``tool.progress_every``) and an MCP
  server's questions (``iris.agent.elicitation``) reach the turn's consumers.

Every call is bracketed ``ToolStarted`` → ``ToolEnded`` (with the last ``PREVIEW_CHARS`` of its
output), whatever its outcome.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from iris.agent.approvals import ApprovalPolicy, refusal, unaskable
from iris.agent.elicitation import ASKER, Asker
from iris.agent.round import ToolCall
from iris.agent.tools import CALL_CHAT, ToolRegistry, ToolResult, validate_args
from iris.config import Config
from iris.events import ApprovalResolved, Event, ToolEnded, ToolProgress, ToolStarted

if TYPE_CHECKING:
    from iris.agent.core import TurnRequest

log = logging.getLogger(__name__)

PREVIEW_CHARS = 500


class Unanswered(Exception):
    """An approval timed out in a turn with ``unanswered_ends``: the turn stops here."""


class ToolCalls:
    """The tool calls of one turn: ``emit`` gives its events to the turn's consumers, ``spend``
    adds the tokens an MCP server's model requests used to the turn's."""

    def __init__(
        self,
        tools: ToolRegistry,
        config: Config,
        request: TurnRequest,
        emit: Callable[[Event], None],
        spend: Callable[[int, int], None],
    ) -> None:
        self._tools = tools
        self._config = config
        self._request = request
        self._emit = emit
        self._spend = spend

    async def run(self, index: int, call: ToolCall, offered: frozenset[str]) -> ToolResult:
        """Run one call, if and only if its tool was offered to the model in this round."""
        started = time.monotonic()
        request = self._request
        try:
            args: Any = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            self._emit(ToolStarted(index, call.name, {"_raw": call.arguments}, call.id))
            result = ToolResult(
                False,
                f"error: the arguments were not valid JSON ({exc.msg} at position {exc.pos}); "
                "call the tool again with a valid JSON object",
            )
            return self._ended(index, call, result, started)
        if not isinstance(args, dict):
            args = {"_value": args}
        self._emit(ToolStarted(index, call.name, args, call.id))
        # A model may call any name it likes; only what this round offered may run
        # (agent_tools off, tool_choice "none" and the last round offer nothing).
        tool = self._tools.get(call.name) if call.name in offered else None
        if tool is None or (call.name == "terminal" and not request.allow_terminal):
            if call.name == "terminal" and not request.allow_terminal:
                why = "is not allowed for this user"
            elif call.name in offered:  # its MCP server went down since the round began
                why = "is no longer available (its server disconnected)"
            else:
                why = "was not offered to you in this round"
            refused = ToolResult(False, f"error: tool '{call.name}' {why}; it was not run")
            return self._ended(index, call, refused, started)
        problem = validate_args(tool.parameters, args)
        if problem:
            return self._ended(index, call, ToolResult(False, f"error: {problem}"), started)
        CALL_CHAT.set(request.chat_id)  # the terminal's workspace is the chat's
        where = tool.where(request.chat_id) if tool.where is not None else None
        answer = await self._approval(index, call.name, args, where)
        if answer is not None:
            return self._ended(index, call, ToolResult(False, answer), started)
        last_note = 0.0

        def progress(note: str) -> None:
            nonlocal last_note
            now = time.monotonic()
            if note and now - last_note >= tool.progress_every:
                last_note = now
                self._emit(ToolProgress(index, call.name, note))

        # The turn, for an MCP server that asks during the call (``iris.agent.elicitation``).
        ASKER.set(Asker(request.chat_id, self._emit, progress, request.elicitations, self._spend))
        try:
            result = await tool.run(args, progress)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("tool %s failed", call.name)
            result = ToolResult(False, f"error: {type(exc).__name__}: {exc}")
        return self._ended(index, call, result, started)

    async def _approval(
        self, index: int, name: str, args: dict[str, Any], where: str | None
    ) -> str | None:
        """The gate before every tool run (built-in and MCP): None when the call may run, else
        the refusal the model gets as the tool's result (``tools.approval``). ``where``: how
        the call will run, for the person asked."""
        request = self._request
        approvals = request.approvals
        if approvals is None:
            policy = ApprovalPolicy.configured(
                self._config.tools.approval, self._config.mcp_servers
            )
            return unaskable(name) if policy.asks(name, request.ask_also) else None
        chat_id = request.chat_id
        # An "allow in this chat" of a group holds for the turns of the person who gave it.
        person = str(request.metadata.get("user_id") or "")
        if not await approvals.asks(chat_id, name, request.ask_also, person):
            return None
        asked = approvals.request(index, name, args, where=where)
        await approvals.open(chat_id, asked)  # in the store before any device sees it
        self._emit(asked)
        try:
            resolution = await approvals.wait(chat_id, asked)
        except asyncio.CancelledError:
            self._emit(ApprovalResolved(asked.approval_id, "cancelled", "interrupt"))
            raise
        self._emit(resolution.event())
        if resolution.decision in ("once", "chat"):
            return None
        if resolution.decision == "timeout" and request.unanswered_ends:
            raise Unanswered
        return refusal(resolution.decision, resolution.by)

    def _ended(self, index: int, call: ToolCall, result: ToolResult, started: float) -> ToolResult:
        duration = round(time.monotonic() - started, 3)
        preview = result.output[-PREVIEW_CHARS:]
        self._emit(ToolEnded(index, call.name, result.ok, duration, preview))
        return result

"""A voice turn after its spoken reply ended: its Assist tools carried out through Home
Assistant, their approvals asked on the owner chat's devices, its answer announced.

Assist's tools are client tools: Home Assistant runs a call that comes back in the response.
Once the response has ended (the acknowledgement after ``voice.ack_after``, or the sentence
that says where to approve), a call the model makes has nowhere to go, so Iris carries it out
itself, the way Assist's ``IntentTool`` would: the tool's name is an intent's (``HassTurnOn``,
``HassTurnOff``...) and its arguments are the intent's slots, sent to Home Assistant's
``POST /api/intent/handle`` (``Runtime.house``). The intent response (without ``language`` and
``card``, as ``IntentTool`` returns it) goes back to the model as the tool's result, the turn
goes on, for at most ``MAX_ROUNDS`` rounds, and its answer is announced: on
``voice.satellite``, else as a notification. A tool that is not an intent (``GetLiveContext``,
a script) gets an error result that says so.

A tool ``voice.approval`` names (and ``tools.approval`` does not turn off: mode ``off``, or
``auto``) waits for a person's yes on the devices of ``voice.owner_chat``: the request goes
through the approvals broker as the chat's own turns' do, so the web app and the Textual app
show it (``approval.request``), Web Push tells a phone, and the first ``approval.respond``
wins; ``chat`` lets the tool run unasked there for ``tools.approval.allow_ttl``. Refused or
unanswered, the model is told it was not done, and its answer (announced) says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import Callable
from fnmatch import fnmatchcase
from typing import Any, cast

from iris.agent.approvals import refusal, refused
from iris.agent.core import Agent, TurnRequest
from iris.config import HomeAssistantVoice
from iris.events import ApprovalResolved, Event, TurnEnded
from iris.formats.speech import spoken
from iris.runtime import House, HouseError, ShowApproval
from iris.state.approvals import Approvals
from iris.surfaces.socket.chats import session_key

log = logging.getLogger("iris.api")

MAX_ROUNDS = 10  # tool rounds of one conversation turn: Home Assistant's own limit
# Tools of Assist's API that are not intents: Home Assistant runs them inside Assist only.
NOT_INTENTS = ("GetLiveContext", "GetDateTime")
# What the speaker says when a tool of the answer waits for a person's yes, and when it
# cannot (no owner chat): one sentence each, and the response ends.
APPROVE = "That needs your approval first: approve it in the Iris app."
REFUSED = "Sorry, I can't do that by voice: it needs a person's approval."
WHERE = "in Home Assistant, asked by voice"  # the approval's preview says where it runs


@dataclasses.dataclass
class VoiceLater:
    agent: Agent
    settings: HomeAssistantVoice
    approvals: Approvals
    house: Callable[[], House | None]
    show: Callable[[], ShowApproval | None]

    # -- what asks --------------------------------------------------------------------------
    def can_ask(self) -> bool:
        """Is there someone to ask: an owner chat, and the iris socket to show it on."""
        return self.settings.owner_chat is not None and self.show() is not None

    async def needs_approval(self, name: str) -> bool:
        """Does a call of Assist's tool ``name`` wait for a person's yes?"""
        patterns = tuple(self.settings.approval)
        if not any(fnmatchcase(name, pattern) for pattern in patterns):
            return False
        return await self.approvals.asks(self._session, name, also=patterns)

    @property
    def _session(self) -> str:
        chat = self.settings.owner_chat
        return session_key(chat) if chat is not None else ""

    # -- the turn after its response ---------------------------------------------------------
    async def finish(self, request: TurnRequest, final: Event | None, sent: set[int]) -> None:
        """Go on from the turn's last event to its answer, and announce it. ``sent``: the
        indexes of the first round's calls that went out with the response (Home Assistant
        runs those)."""
        rounds = 0
        while isinstance(final, TurnEnded) and final.reason == "tool_calls" and final.tool_calls:
            if rounds == MAX_ROUNDS:
                log.warning("voice turn: %d tool rounds after its reply; stopped", rounds)
                return
            results = [
                await self._result(index, call, sent if rounds == 0 else set())
                for index, call in enumerate(final.tool_calls)
            ]
            request = dataclasses.replace(
                request, messages=[*request.messages, *final.messages, *results]
            )
            final = await self._run(request)
            rounds += 1
        await self._announce(final)

    async def _run(self, request: TurnRequest) -> Event | None:
        final: Event | None = None
        async with self.agent.run(request) as turn:
            async for event in turn:
                final = event
        return final

    async def _result(self, index: int, call: dict[str, str], sent: set[int]) -> dict[str, Any]:
        output = await self._output(index, call, sent)
        return {"role": "tool", "tool_call_id": call["id"], "content": output}

    async def _output(self, index: int, call: dict[str, str], sent: set[int]) -> str:
        name = call["name"]
        if index in sent:
            return f"{name} went to Home Assistant with the spoken reply; it runs it there."
        try:
            args = json.loads(call.get("arguments") or "{}")
        except ValueError:
            args = None
        if not isinstance(args, dict):
            return f"error: the arguments of {name} are not a JSON object; it was not run"
        args = cast(dict[str, Any], args)
        if await self.needs_approval(name):
            refused_why = await self._approval(index, name, args)
            if refused_why is not None:
                return refused_why
        return await self._intent(name, args)

    async def _intent(self, name: str, args: dict[str, Any]) -> str:
        after = (
            "after the spoken reply ended only Assist's intents (HassTurnOn, HassTurnOff, ...) "
            "can be carried out"
        )
        if name in NOT_INTENTS:
            return f"error: {name} is not an intent; {after}. It was not run."
        house = self.house()
        if house is None:
            return f"error: Home Assistant is not connected; {name} was not run."
        try:
            answer = await house.handle_intent(name, args)
        except HouseError as exc:
            return f"error: {exc} ({after})."
        shown = {k: v for k, v in answer.items() if k not in ("language", "card")}
        return json.dumps(shown, ensure_ascii=False)

    async def _approval(self, index: int, name: str, args: dict[str, Any]) -> str | None:
        """Ask the owner chat's devices; None when the call may run, else what the model is
        told."""
        show, chat = self.show(), self.settings.owner_chat
        if show is None or chat is None:
            return refused(
                f"platforms.homeassistant.voice.approval asks before '{name}' runs, and no "
                "owner chat is configured to ask"
            )
        request = self.approvals.request(index + 1, name, args, where=WHERE)  # from 1
        await self.approvals.open(self._session, request)  # in the store before it is shown
        try:
            show(chat, request)
        except Exception:
            log.exception("voice turn: the approval of %s could not be shown", name)
            with contextlib.suppress(Exception):
                await self.approvals.abandon(request.approval_id)
            return refused("the owner's devices could not be reached")
        try:
            resolution = await self.approvals.wait(self._session, request)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                show(chat, ApprovalResolved(request.approval_id, "cancelled", "interrupt"))
            raise
        with contextlib.suppress(Exception):  # the answer holds even if its echo fails
            show(chat, resolution.event())
        if resolution.decision in ("once", "chat"):
            return None
        return refusal(resolution.decision, resolution.by)

    async def _announce(self, final: Event | None) -> None:
        if not isinstance(final, TurnEnded) or not final.text.strip():
            log.info("voice turn ended after its spoken reply without an answer")
            return
        text = spoken(final.text)
        house = self.house()
        if house is None:
            log.warning("voice answer not delivered (no Home Assistant platform): %s", text)
            return
        try:
            await house.announce(text)
        except Exception as exc:
            log.warning("voice answer not delivered: %s", exc)

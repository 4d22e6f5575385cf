"""An MCP server's request for input, asked in the chat of the turn whose call it came from.

``iris.agent.elicitation`` brings the request into the turn as ``ElicitationRequested``; here
it becomes a message in the chat, one field at a time (``iris.agent.forms.Filling``):

- a yes-or-no (a boolean field, a form without fields, a link to open) or an enum: buttons, one
  per answer (a Telegram inline keyboard, Discord components, Slack blocks: the platform's
  approval buttons, ``ApprovalPlatform.send_prompt``), beside **Decline** and **Cancel**;
- a free-text or number field: "reply to this message" — the person's next message in that
  chat (or thread) answers it, instead of starting a turn; in a group, one addressed to the
  bot (a reply to its message is).

An answer that cannot be read or does not fit its field is asked again with the reason; the
whole answer goes to the broker, which checks it against the schema once more and sends it to
the server. Each question, once answered, is edited to say what was answered (its buttons go);
the request's end (answered, declined, timed out, the turn interrupted) closes the last one.

A button hands back ``iris-elicit:<token>:<code>`` (``y``/``n``, ``c<i>`` for the i-th choice,
``d`` decline, ``x`` cancel); the random token names the request in this process only: the
platforms with buttons are received by one process at a time (their poller's lease), the one
that runs their turns.

A platform without question buttons (``asks_by_reply``: WhatsApp has none, Matrix's reactions
offer three answers) asks every field by reply: the question lists the form's fields, the
current one's way to answer (an enum's choices numbered, yes or no), and the words that end it
(``DECLINE`` / ``CANCEL``, the whole message; ``SKIP`` leaves an optional field out); the
person's next message answers, as above.
Where messages cannot be edited (WhatsApp) the request's end is said in a message of its own.
A webhook may bring that reply to another process than the one asking (``--workers``, two
processes on one store): the asking one names the request in the shared store while the
question waits, the other hands the reply over (``hand_over``) instead of starting a turn, and
the asking one reads it as its own (``iris.state.elicitations``): a wrong answer is asked again
from there.
A platform that asks neither way (Home Assistant) asks nobody: the request is declined at once
(the runner gives its conversations no broker).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from iris.agent.elicitation import Answer, ElicitationError, Elicitations
from iris.agent.forms import Filling
from iris.errors import StoreUnavailable
from iris.events import ElicitationRequested, ElicitationResolved, Event
from iris.state.elicitations import POLL, Reply, SharedElicitations
from iris.surfaces.chat.platforms.base import (
    ChatPlatform,
    IncomingMessage,
    PlatformError,
    PlatformRateLimited,
    WebhookPlatform,
    approval_platform,
)
from iris.surfaces.chat.prompts import ATTEMPTS, NOT_ALLOWED, NOT_OPEN, QUESTION, Button, Prompt
from iris.tasks import logged

log = logging.getLogger(__name__)

PREFIX = QUESTION
T = TypeVar("T")
RATE_WAIT_MAX = 30.0  # seconds: a longer wait the platform asks for is cut to this
OUTCOMES = {
    "accept": "✅ Answered",
    "decline": "❌ Declined",
    "cancel": "⏹ Cancelled",
    "timeout": "⌛ Declined: nobody answered in time",
}
# Asked by reply, these words (the whole message, any case) decline or cancel the request.
DECLINE = "decline"
CANCEL = "cancel"
SKIP = "skip"  # an optional field: left out
Way = Literal["buttons", "reply"]


def asks(platform: ChatPlatform) -> Way | None:
    """How ``platform`` asks an MCP server's question: with buttons (``asks_questions``: any
    number of them), every field by reply (``asks_by_reply``), or not at all (None)."""
    if getattr(platform, "asks_questions", False) and approval_platform(platform) is not None:
        return "buttons"
    return "reply" if getattr(platform, "asks_by_reply", False) else None


@dataclass(eq=False)
class Asking:
    """One request asked in one chat, until it ends."""

    request: ElicitationRequested
    platform: ChatPlatform
    chat_id: str  # the platform's
    thread: Mapping[str, str]
    session: str  # the conversation: the chat the broker asks in
    way: Way = "buttons"
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    filling: Filling = field(init=False)
    message_id: str | None = None  # the question on screen now
    said: str = ""  # its text, kept when it is closed
    # With a shared store, on a webhook platform: takes the replies other processes got.
    relayed: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.filling = Filling(self.request.schema)

    @property
    def by_reply(self) -> bool:
        """The question on screen is answered by a reply (free text, a number; any field
        where the platform asks by reply)."""
        asked = self.filling.current
        if self.way == "reply":
            return True
        return asked is not None and asked.kind in ("text", "integer", "number")


def question(asking: Asking) -> Prompt:
    """The message asking the current field, with its buttons (none where asked by reply)."""
    if asking.way == "reply":
        return Prompt(replied(asking), ())
    request, filling = asking.request, asking.filling
    lines = [f"❓ {request.server} asks: {request.message}"]
    if request.url:
        lines.append(f"Open: {request.url}")
    asked = filling.current
    codes: list[tuple[str, str]] = []
    if asked is None:
        codes.append(("y", "Continue" if request.url else "Yes"))
    elif asked.kind == "boolean":
        lines.append(asked.question)
        codes += [("y", "Yes"), ("n", "No")]
    elif asked.kind == "choice":
        lines.append(asked.question)
        codes += [(f"c{i}", c.label) for i, c in enumerate(asked.choices)]
    else:
        hint = f" ({asked.hint})" if asked.hint else ""
        lines.append(f"{asked.question}\n↩️ Reply to this message with the answer{hint}.")
    if filling.problem:
        lines.append(f"⚠️ {filling.problem}, please answer again.")
    codes += [("d", "Decline"), ("x", "Cancel")]
    buttons = tuple(Button(label, f"{PREFIX}:{asking.token}:{code}") for code, label in codes)
    return Prompt("\n\n".join(lines), buttons)


def replied(asking: Asking) -> str:
    """The message asking the current field by reply: the form's fields, how to answer this
    one, and the words that decline or cancel."""
    request, filling = asking.request, asking.filling
    lines = [f"❓ {request.server} asks: {request.message}"]
    if request.url:
        lines.append(f"Open: {request.url}")
    asked = filling.current
    if len(filling.fields) > 1:
        listed = ", ".join(f"{f.label}{' *' if f.required else ''}" for f in filling.fields)
        at = filling.fields.index(asked) + 1 if asked is not None else len(filling.fields)
        lines.append(f"Fields: {listed} (* required); asking {at} of {len(filling.fields)}.")
    if asked is None:
        lines.append("↩️ Reply yes to continue, or no." if request.url else "↩️ Reply yes or no.")
    elif asked.kind == "boolean":
        lines.append(f"{asked.question}\n↩️ Reply yes or no.")
    elif asked.kind == "choice":
        listed = "\n".join(f"{i}. {c.label}" for i, c in enumerate(asked.choices, 1))
        lines.append(f"{asked.question}\n{listed}\n↩️ Reply with a number or a name.")
    else:
        hint = f" ({asked.hint})" if asked.hint else ""
        lines.append(f"{asked.question}\n↩️ Reply with the answer{hint}.")
    if asked is not None and not asked.required:
        lines.append(f'(Optional: reply "{SKIP}" to leave it out.)')
    if filling.problem:
        lines.append(f"⚠️ {filling.problem}, please answer again.")
    lines.append(f'Or reply "{DECLINE}" to refuse, "{CANCEL}" to dismiss the question.')
    return "\n\n".join(lines)


def typed(asking: Asking, code: str) -> str | None:
    """What a button's ``code`` types into the current field; None: not one of its buttons."""
    asked = asking.filling.current
    if code in ("y", "n"):
        return "yes" if code == "y" else "no"
    if asked is not None and code.startswith("c") and code[1:].isdigit():
        return str(int(code[1:]) + 1) if int(code[1:]) < len(asked.choices) else None
    return None


class ChatQuestions:
    """The requests asked in this process's chats, by button token and by conversation."""

    def __init__(self, broker: Elicitations) -> None:
        self.broker = broker
        self._by_token: dict[str, Asking] = {}
        self._by_session: dict[str, Asking] = {}

    def waiting(self, session: str) -> bool:
        """A request waits for an answer in this conversation (its next message answers)."""
        return session in self._by_session

    async def watch(
        self,
        events: AsyncIterable[Event],
        platform: ChatPlatform,
        message: IncomingMessage,
        session: str,
    ) -> AsyncIterator[Event]:
        """The turn's events, its requests asked in the chat of ``message`` on the way (the
        way ``asks`` says)."""
        way = asks(platform) or "reply"
        mine: list[Asking] = []
        try:
            async for event in events:
                if isinstance(event, ElicitationRequested):
                    asking = Asking(event, platform, message.chat_id, message.thread, session, way)
                    mine.append(asking)
                    await self._open(asking)
                elif isinstance(event, ElicitationResolved):
                    await self._resolved(event)
                yield event
        finally:
            for asking in mine:
                self._forget(asking)

    async def _open(self, asking: Asking) -> None:
        self._by_token[asking.token] = asking
        self._by_session[asking.session] = asking
        await self._share(asking)
        await self._ask(asking)

    def _forget(self, asking: Asking) -> None:
        self._by_token.pop(asking.token, None)
        if self._by_session.get(asking.session) is asking:
            del self._by_session[asking.session]
        if asking.relayed is not None:
            asking.relayed.cancel()  # it forgets the chat's question in the store

    async def _share(self, asking: Asking) -> None:
        """A question by reply on a webhook platform, with a shared store: the reply may reach
        any process, so the store names the request in its chat (before the question is seen)
        and the replies other processes hand over come here. The store away: replies reach
        this process only."""
        shared = self.broker.shared
        if shared is None or asking.way != "reply":
            return
        if not isinstance(asking.platform, WebhookPlatform):
            return  # received by one process (its poller's lease): the one asking
        request = asking.request
        ttl = request.expires_at - time.time()
        try:
            await shared.asking(asking.session, request.elicitation_id, ttl)
        except StoreUnavailable as exc:
            log.warning("question in %s asked here only: %s", asking.chat_id, exc.message)
            return
        work = logged(self._take_replies(asking, shared), "a question's relayed replies")
        asking.relayed = asyncio.create_task(work)

    async def _take_replies(self, asking: Asking, shared: SharedElicitations) -> None:
        """Every ``POLL`` s, the replies other processes handed over, read as this process's
        own, until the request ends (cancelled); then the chat's question is forgotten."""
        elicitation_id = asking.request.elicitation_id
        try:
            while True:
                await asyncio.sleep(POLL)
                try:
                    replies = await shared.replies(elicitation_id)
                except StoreUnavailable:
                    continue  # a reply given here still arrives
                for reply in replies:
                    await self._reply(asking, reply.text, reply.by)
        finally:
            try:
                await shared.done_asking(asking.session, elicitation_id)
            except StoreUnavailable as exc:  # it expires with the request
                log.info("question in %s not forgotten: %s", asking.chat_id, exc.message)

    async def hand_over(self, session: str, message: IncomingMessage) -> bool:
        """``message`` answers a question another process asks by reply in its conversation
        (a webhook reaches any process): handed to that one, which reads it (True). False:
        none waits there (or the store is away), it is a message like any other."""
        shared = self.broker.shared
        if shared is None or session in self._by_session:
            return False
        reply = Reply(message.text, message.user_name or message.user_id)
        try:
            elicitation_id = await shared.asked(session)
            if elicitation_id is None:
                return False
            await shared.relay(elicitation_id, reply, self.broker.timeout)
        except StoreUnavailable as exc:
            log.warning("reply in %s not handed over: %s", message.chat_id, exc.message)
            return False
        return True

    async def _ask(self, asking: Asking) -> None:
        prompt = question(asking)
        platform, buttons = asking.platform, approval_platform(asking.platform)
        if asking.way == "buttons" and buttons is not None:
            send = functools.partial(
                buttons.send_prompt, asking.chat_id, prompt, thread=asking.thread
            )
        elif buttons is not None:  # its prompts' reactions are no answers here: plain text
            send = functools.partial(
                buttons.send_as_written, asking.chat_id, prompt.text, thread=asking.thread
            )
        else:
            send = functools.partial(
                platform.send, asking.chat_id, prompt.text, thread=asking.thread
            )
        try:
            asking.message_id = await _paced(send)
            asking.said = prompt.text
        except PlatformError as exc:  # unanswered, it is declined at the timeout
            log.info("question in %s not delivered: %s", asking.chat_id, exc)

    async def _close(self, asking: Asking, outcome: str, *, last: bool = False) -> None:
        """The question on screen loses its buttons and says how it was answered; where
        messages cannot be edited, the request's end (``last``) is said in a message."""
        message_id, asking.message_id = asking.message_id, None
        if message_id is None:
            return
        text = f"{asking.said}\n\n{outcome}"
        platform, buttons = asking.platform, approval_platform(asking.platform)
        chat_id, thread = asking.chat_id, asking.thread
        if buttons is not None:
            close = functools.partial(
                buttons.close_prompt, chat_id, message_id, text, thread=thread
            )
        elif platform.capabilities.can_edit:
            close = functools.partial(
                platform.edit_message, chat_id, message_id, text, thread=thread
            )
        elif last:
            told = f"{asking.request.server} asked: {asking.request.message}\n{outcome}"
            close = functools.partial(_sent, platform, chat_id, told, thread)
        else:
            return
        try:
            await _paced(close)
        except PlatformError as exc:
            log.info("question in %s not closed: %s", asking.chat_id, exc)

    async def _resolved(self, event: ElicitationResolved) -> None:
        asking = next(
            (
                a
                for a in self._by_token.values()
                if a.request.elicitation_id == event.elicitation_id
            ),
            None,
        )
        if asking is None:
            return
        self._forget(asking)
        who = f" by {event.by}" if event.action in ("accept", "decline") else ""
        outcome = f"{OUTCOMES.get(event.action, event.action)}{who}"
        await self._close(asking, outcome, last=True)

    # -- answers ------------------------------------------------------------------------------

    async def press(self, message: IncomingMessage, allowed: bool) -> None:
        """A press of a question's button; the presser is told the outcome (once)."""
        press = message.press
        assert press is not None
        note, refused = await self._pressed(message, allowed)
        try:
            await press.answer(note, refused)
        except PlatformError as exc:
            log.info("answer to a question's press in %s not delivered: %s", message.chat_id, exc)

    async def _pressed(self, message: IncomingMessage, allowed: bool) -> tuple[str, bool]:
        assert message.press is not None
        _prefix, _, rest = message.press.data.partition(":")
        token, _, code = rest.partition(":")
        asking = self._by_token.get(token)
        if asking is None or (asking.chat_id, asking.message_id) != (
            message.chat_id,
            message.message_id,
        ):
            return NOT_OPEN, True
        if not allowed:
            return NOT_ALLOWED, True
        by = message.user_name or message.user_id
        if code in ("d", "x"):
            await self._answer(asking, Answer("decline" if code == "d" else "cancel"), by)
            return "Declined" if code == "d" else "Cancelled", False
        value = typed(asking, code)
        if value is None:
            return NOT_OPEN, True
        label = _label(asking, code)
        await self._give(asking, value, by, shown=label)
        return f"Answered: {label}", False

    async def reply(self, message: IncomingMessage, session: str) -> None:
        """The person's message while a request waits in ``session``: the current field's
        answer."""
        asking = self._by_session.get(session)
        if asking is None:
            return
        await self._reply(asking, message.text, message.user_name or message.user_id)

    async def _reply(self, asking: Asking, text: str, by: str) -> None:
        word = text.strip().lower()
        if asking.way == "reply" and word in (DECLINE, CANCEL):
            await self._answer(asking, Answer("decline" if word == DECLINE else "cancel"), by)
            return
        asked = asking.filling.current
        if asking.way == "reply" and word == SKIP and asked is not None and not asked.required:
            await self._give(asking, "", by, shown="(left out)")  # an empty answer skips it
            return
        await self._give(asking, text, by)

    async def _give(self, asking: Asking, text: str, by: str, shown: str = "") -> None:
        asked = asking.filling.current
        answer = asking.filling.give(text)
        if (
            not shown
            and asked is not None
            and asked.kind == "choice"
            and not asking.filling.problem
        ):
            # A choice typed by its number says which it was.
            value = asking.filling.content.get(asked.name)
            shown = next((c.label for c in asked.choices if c.value == value), "")
        shown = shown or text.strip()
        if answer is None:
            await self._close(asking, f"↪️ {shown}" if not asking.filling.problem else f"✗ {shown}")
            await self._ask(asking)
            return
        await self._answer(asking, answer, by)

    async def _answer(self, asking: Asking, answer: Answer, by: str) -> None:
        request = asking.request
        try:
            self.broker.respond(
                request.elicitation_id,
                answer.action,
                answer.content,
                chat_id=asking.session,
                by=by,
            )
        except ElicitationError as exc:
            if exc.code != "elicitation_invalid":
                return  # it ended meanwhile: its resolution closes the question
            asking.filling = Filling(request.schema)  # the form as a whole: from the start
            asking.filling.problem = exc.message
            await self._close(asking, "✗")
            await self._ask(asking)


async def _sent(platform: ChatPlatform, chat_id: str, text: str, thread: Mapping[str, str]) -> None:
    await platform.send(chat_id, text, thread=thread)


async def _paced(call: Callable[[], Awaitable[T]]) -> T:
    """``call``, again after the wait a rate-limited platform asks for (``ATTEMPTS`` tries)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return await call()
        except PlatformRateLimited as exc:
            if attempt == ATTEMPTS:
                raise
            await asyncio.sleep(min(exc.retry_after, RATE_WAIT_MAX))
    raise AssertionError("unreachable")


def _label(asking: Asking, code: str) -> str:
    """The label of the button ``code`` on the question on screen."""
    return next((b.label for b in question(asking).buttons if b.data.endswith(f":{code}")), code)

"""Approval prompts on the chat platforms: what the message with the buttons says, and which are open.

A tool call that waits for a person's yes (``iris.state.approvals``) is shown in the chat as a
message with three buttons, **Allow once**, **Allow in this chat** and **Deny**; the message
carries the whole command (or arguments) while its buttons are live: one that does not fit
goes first as plain messages, in parts that re-join to the whole, and the message with the
buttons says so; each part is marked ``⟨cut⟩`` where it was cut (at its end and at the start of
the next), so a space at a cut is seen. The command is drawn as the shell reads it
(:mod:`iris.formats.visible`: an invisible or control character as ``⟨U+XXXX⟩``, with a warning
line). Once the request ends (an answer, the timeout, an interrupt) the message is
edited: the buttons go, and it says what was decided and by whom.

A button hands back ``iris-approval:<o|c|d>:<token>`` (Telegram ``callback_data`` takes 64
bytes at most, Discord ``custom_id`` 100): the token is random, and ``Prompts`` maps it to the
request, so a button of an earlier process never answers a request of this one. With a shared
store the registry also keeps each prompt shown there (``iris.state.prompts``), so a press
that reaches another process answers it too.

A reply without buttons (a consumer built without ``Prompts``) says in plain messages that a
request waits and how it ended; the runner asks nobody on a platform without buttons
(WhatsApp): a tool that asks is refused there at once.

A press of a button (``Prompts.press``) counts only on the very message that shows the request's
buttons, in its chat, from a person the platform's ``allowed_users`` lets in (the runner admits,
this answers); the presser is told the outcome where only they see it.

Pure: rendering and ``ReplyPrompts`` (the approval messages of one reply, in the order they go
out); the platform calls are the adapters', the pacing the consumer's.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from iris.errors import StoreUnavailable
from iris.events import ApprovalRequested, ApprovalResolved
from iris.formats import visible
from iris.state.approvals import Approvals, Decision, Outcome
from iris.surfaces.chat.platforms.base import PlatformError
from iris.surfaces.chat.splitter import Unit, measure, split

if TYPE_CHECKING:
    from iris.state.prompts import SharedPrompts
    from iris.surfaces.chat.platforms.base import IncomingMessage

log = logging.getLogger(__name__)

PREFIX = "iris-approval"
QUESTION = "iris-elicit"  # the buttons of an MCP server's question (``questions``)
_CODES: dict[str, Decision] = {"o": "once", "c": "chat", "d": "deny"}
LABELS: dict[Decision, str] = {"once": "Allow once", "chat": "Allow in this chat", "deny": "Deny"}

NOT_ALLOWED = "You are not allowed to answer this request."
NOT_OPEN = "This request is no longer open."
# A reply whose platform shows no buttons (the runner asks nobody there; a consumer built
# without prompts): the request is said in the chat all the same.
NO_BUTTONS = "It cannot be answered here; without an answer in time it is not run."


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    data: str  # handed back by the platform on a press (callback_data, custom_id, value)
    decision: Decision | None = None  # an approval's; None on an MCP server's question


@dataclass(frozen=True, slots=True)
class Prompt:
    """The message with the buttons: ``text`` fits the platform's approval limit."""

    text: str
    buttons: tuple[Button, ...]


@dataclass(frozen=True, slots=True)
class Press:
    """A person pressed a button of a prompt (on an ``IncomingMessage``, with their ids).

    ``answer(text, refused)`` answers the press where only the presser sees it (Telegram
    ``answerCallbackQuery``, a Discord interaction response, a Slack ephemeral message): every
    press is answered once. ``refused``: nothing changed (not allowed, already decided)."""

    data: str
    answer: Callable[[str, bool], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Rendered:
    """A request as messages: ``parts`` go first (the body did not fit one message), then
    ``prompt``; ``gist`` is what the message keeps of the request once it is closed."""

    parts: tuple[str, ...]
    prompt: Prompt
    gist: str


def buttons(token: str) -> tuple[Button, ...]:
    return tuple(
        Button(LABELS[decision], f"{PREFIX}:{code}:{token}", decision)
        for code, decision in _CODES.items()
    )


def is_button(data: str) -> bool:
    """A button of ours: an approval's or an MCP server's question's."""
    return data.startswith((f"{PREFIX}:", f"{QUESTION}:"))


def parse_press(data: str) -> tuple[str, Decision] | None:
    """``(token, decision)`` from a button's data, or None when it is no approval button."""
    prefix, _, rest = data.partition(":")
    code, _, token = rest.partition(":")
    if prefix != PREFIX or code not in _CODES or not token:
        return None
    return token, _CODES[code]


def render(name: str, body: str, seconds: float, token: str, *, limit: int, unit: Unit) -> Rendered:
    """The messages showing request ``token`` for tool ``name`` with ``body`` (its preview or
    arguments, drawn as the shell reads it), which expires in ``seconds``; every message fits
    ``limit``."""
    alarm = visible.warning(body)
    body = visible.shown(body)
    head = f"⚠️ Approve {name}?" + (f"\n{alarm}" if alarm else "")
    tail = f"Not run unless allowed within {_duration(seconds)}."
    whole = f"{head}\n\n{body}\n\n{tail}"
    if measure(whole, unit) <= limit:
        return Rendered((), Prompt(whole, buttons(token)), f"{name}: {body}")
    parts = _marked(_parts(body, limit - measure(visible.CUT * 2, unit), unit))
    where = "the message above" if len(parts) == 1 else f"the {len(parts)} messages above"
    cut = f", cut at {visible.CUT}" if len(parts) > 1 else ""
    text = f"{head}\nIts full input is in {where}{cut}.\n\n{tail}"
    return Rendered(parts, Prompt(text, buttons(token)), f"{name}: its input is in {where}")


def _marked(parts: list[str]) -> tuple[str, ...]:
    """Each cut marked on both sides: a space at the end of one part or the start of the next
    is seen (a platform draws none at a message's edge)."""
    last = len(parts) - 1
    return tuple(
        (visible.CUT if i else "") + part + (visible.CUT if i < last else "")
        for i, part in enumerate(parts)
    )


def _parts(body: str, limit: int, unit: Unit) -> list[str]:
    """``body`` in slices that fit ``limit`` and join to it exactly (no fence repair, unlike a
    reply's split: a command is shown as it will run), cut at a line break or a space in the
    last half of a window where there is one, never inside a ``⟨U+XXXX⟩`` marker."""
    parts: list[str] = []
    start = 0
    while start < len(body):
        end, size = start, 0
        while end < len(body) and size + measure(body[end], unit) <= limit:
            size += measure(body[end], unit)
            end += 1
        end = max(end, start + 1)  # a limit below one character still moves on
        if end < len(body):
            window = body[start:end]
            cut = max(window.rfind("\n"), window.rfind(" ")) + 1
            if cut > len(window) // 2:
                end = start + cut
            opened = body.rfind(visible.OPEN, start, end)
            if opened > start and body.find(visible.CLOSE, opened, end) < 0:
                end = opened  # the marker goes whole into the next part
        parts.append(body[start:end])
        start = end
    return parts


def outcome_line(outcome: Outcome, by: str) -> str:
    match outcome:
        case "once":
            return f"✅ Allowed once by {by}"
        case "chat":
            return f"✅ Allowed in this chat by {by}"
        case "deny":
            return f"❌ Denied by {by}: not run"
        case "timeout":
            return "⌛ No answer in time: not run"
        case "cancelled":
            return "⏹ Cancelled (the reply was interrupted): not run"


def closed_text(outcome: Outcome, by: str, gist: str, *, limit: int, unit: Unit) -> str:
    """The prompt once its request ended: the outcome, then as much of the gist as fits (the
    buttons are gone: nothing can be approved on a cut text any more)."""
    line = outcome_line(outcome, by)
    text = f"{line}\n\n{gist}"
    if measure(text, unit) <= limit:
        return text
    room = limit - measure(f"{line}\n\n…", unit)
    return f"{line}\n\n{split(gist, room, unit)[0].text}…" if room > 1 else line[:limit]


def _duration(seconds: float) -> str:
    seconds = max(1, math.ceil(seconds))
    if seconds < 120:
        return f"{seconds} s"
    return f"{math.ceil(seconds / 60)} min"


@dataclass
class OpenPrompt:
    """A request shown in a chat, until it ends."""

    approval_id: str
    name: str
    platform: str
    chat_id: str  # the platform's
    session: str  # the conversation (``runner.session_key``): the chat the broker asks in
    thread: Mapping[str, str] = field(default_factory=dict[str, str])
    gist: str = ""
    message_id: str | None = None  # the message with the buttons, once it landed
    expires_at: float = 0.0

    def fields(self) -> dict[str, str]:
        """As the shared store keeps it (``iris.state.prompts``)."""
        return {
            "approval_id": self.approval_id,
            "name": self.name,
            "platform": self.platform,
            "chat_id": self.chat_id,
            "session": self.session,
            "thread": json.dumps(dict(self.thread)),
            "gist": self.gist,
            "message_id": self.message_id or "",
            "expires_at": repr(self.expires_at),
        }

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> OpenPrompt:
        return cls(
            fields["approval_id"],
            fields["name"],
            fields["platform"],
            fields["chat_id"],
            fields["session"],
            cast(dict[str, str], json.loads(fields.get("thread") or "{}")),
            fields.get("gist", ""),
            fields.get("message_id") or None,
            float(fields.get("expires_at") or 0.0),
        )


class Prompts:
    """The open approval prompts of one chat surface, by button token and by request; with
    ``shared``, also those any process shows (a press may reach another process)."""

    def __init__(self, shared: SharedPrompts | None = None) -> None:
        self._by_token: dict[str, OpenPrompt] = {}
        self._tokens: dict[str, str] = {}  # approval id -> token
        self.shared = shared

    def open(self, prompt: OpenPrompt) -> str:
        token = secrets.token_hex(8)
        self._by_token[token] = prompt
        self._tokens[prompt.approval_id] = token
        return token

    def get(self, token: str) -> OpenPrompt | None:
        return self._by_token.get(token)

    def close(self, approval_id: str) -> None:
        token = self._tokens.pop(approval_id, None)
        if token is not None:
            self._by_token.pop(token, None)

    def __len__(self) -> int:
        return len(self._by_token)

    def find(self, approval_id: str) -> OpenPrompt | None:
        token = self._tokens.get(approval_id)
        return None if token is None else self._by_token.get(token)

    async def shown(self, approval_id: str) -> None:
        """The request's prompt landed in its chat: with a shared store, any process that a
        press of it reaches finds it (raises ``StoreUnavailable``)."""
        token = self._tokens.get(approval_id)
        prompt = None if token is None else self._by_token.get(token)
        if self.shared is None or token is None or prompt is None:
            return
        await self.shared.shown(token, prompt.fields(), prompt.expires_at)

    async def lookup(self, token: str) -> OpenPrompt | None:
        """The prompt behind a pressed button's ``token``: this process's, or with a shared
        store one another process shows (raises ``StoreUnavailable``)."""
        prompt = self._by_token.get(token)
        if prompt is not None or self.shared is None:
            return prompt
        found = await self.shared.find(token)
        return None if found is None else OpenPrompt.from_fields(found)

    async def press(
        self,
        platform: str,
        message: IncomingMessage,
        approvals: Approvals,
        allowed: bool,
        *,
        per_person: bool,
    ) -> None:
        """A press of a prompt's button (``message.press``) on ``platform``: the answer, if it
        counts (``allowed``: the presser may answer there); the presser is told the outcome
        where only they see it (every press is answered once). ``per_person``: in a group, a
        ``chat`` answer holds for the presser's turns only."""
        press = message.press
        assert press is not None
        note, refused = await self._answer(platform, message, approvals, allowed, per_person)
        try:
            await press.answer(note, refused)
        except PlatformError as exc:
            log.info("answer to an approval press in %s not delivered: %s", message.chat_id, exc)

    async def _answer(
        self,
        platform: str,
        message: IncomingMessage,
        approvals: Approvals,
        allowed: bool,
        per_person: bool,
    ) -> tuple[str, bool]:
        """What the presser is told, and whether nothing changed."""
        assert message.press is not None
        parsed = parse_press(message.press.data)
        try:
            prompt = await self.lookup(parsed[0]) if parsed is not None else None
        except StoreUnavailable as exc:
            return f"Not recorded, please try again: {exc.message}", True
        # The press must be on the very message that shows the request's buttons, in its chat
        # (Telegram numbers messages per chat: an id alone names one in every chat).
        shown = (platform, message.chat_id, message.message_id)
        if parsed is None or prompt is None:
            return NOT_OPEN, True
        if (prompt.platform, prompt.chat_id, prompt.message_id) != shown:
            return NOT_OPEN, True
        if not allowed:
            log.warning(
                "approval press by %s user %s (%s) refused: not allowed",
                platform,
                message.user_id,
                message.user_name,
            )
            return NOT_ALLOWED, True
        by = message.user_name or message.user_id
        person = message.user_id if message.is_group and per_person else ""
        return await _respond(approvals, prompt, parsed[1], by, person)


async def _respond(
    approvals: Approvals, prompt: OpenPrompt, decision: Decision, by: str, person: str
) -> tuple[str, bool]:
    """Answer the request; what the presser is told, and whether nothing changed."""
    try:
        match await approvals.respond(
            prompt.approval_id, decision, by, chat_id=prompt.session, person=person
        ):
            case "decided":
                return f"{LABELS[decision]}: {prompt.name}", False
            case "already_decided":
                resolution = await approvals.resolution(prompt.approval_id)
                if resolution is None:
                    return "Already decided.", True
                return f"Already decided: {resolution.decision} by {resolution.by}.", True
            case "unknown":
                return NOT_OPEN, True
    except StoreUnavailable as exc:  # the shared store: the answer was not recorded
        return f"Not recorded, please try again: {exc.message}", True


@dataclass(frozen=True, slots=True)
class SendPart:
    """A plain message: part of a request too long for the prompt, or (without buttons) the
    request or its outcome."""

    text: str
    approval_id: str = ""


@dataclass(frozen=True, slots=True)
class SendPrompt:
    approval_id: str
    prompt: Prompt


@dataclass(frozen=True, slots=True)
class ClosePrompt:
    approval_id: str
    message_id: str
    text: str


PromptAction = SendPart | SendPrompt | ClosePrompt

# Tries of one prompt call that the platform rate-limited, before it is given up.
ATTEMPTS = 5


class ReplyPrompts:
    """The approval messages of one reply in one chat, in the order they go out. Pure.

    ``prompts`` is the surface's registry (None: the platform has no buttons); ``limit`` the
    most a prompt message takes (``ApprovalPlatform.approval_limit``, within the platform's
    message limit) in ``unit``."""

    def __init__(
        self,
        prompts: Prompts | None,
        *,
        platform: str,
        chat_id: str,
        session: str,
        thread: Mapping[str, str],
        limit: int,
        unit: Unit,
    ) -> None:
        self.prompts = prompts
        self.platform, self.chat_id, self.thread = platform, chat_id, dict(thread)
        self.session = session
        self.limit = limit
        self.unit: Unit = unit
        self._queue: list[PromptAction] = []
        self._open: dict[str, OpenPrompt] = {}  # this reply's requests not yet resolved
        self._tries = 0  # of the call at the head of the queue

    @property
    def pending(self) -> bool:
        return bool(self._queue)

    @property
    def waiting(self) -> bool:
        """A request of this reply waits for its answer (the turn is not working)."""
        return bool(self._open)

    def next(self) -> PromptAction | None:
        return self._queue[0] if self._queue else None

    def requested(self, event: ApprovalRequested, now: float) -> None:
        """A request to show; ``now`` in Unix seconds (``expires_at``'s clock)."""
        body = event.preview or event.args
        seconds = event.expires_at - now
        if self.prompts is None:
            alarm = visible.warning(body)
            body = visible.shown(body) + (f"\n\n{alarm}" if alarm else "")
            note = f"⚠️ {event.name} waits for approval:\n\n{body}\n\n{NO_BUTTONS}"
            for part in split(note, self.limit, self.unit):
                self._queue.append(SendPart(part.text))
            self._open[event.approval_id] = self._entry(event)
            return
        entry = self._entry(event)
        token = self.prompts.open(entry)
        rendered = render(event.name, body, seconds, token, limit=self.limit, unit=self.unit)
        entry.gist = rendered.gist
        self._open[event.approval_id] = entry
        self._queue.extend(SendPart(part, event.approval_id) for part in rendered.parts)
        self._queue.append(SendPrompt(event.approval_id, rendered.prompt))

    def _entry(self, event: ApprovalRequested) -> OpenPrompt:
        return OpenPrompt(
            event.approval_id,
            event.name,
            self.platform,
            self.chat_id,
            self.session,
            self.thread,
            expires_at=event.expires_at,
        )

    def resolved(self, event: ApprovalResolved) -> None:
        self._close(event.approval_id, event.decision, event.by)

    def ended(self) -> None:
        """The turn ended: a request it left open (a broken stream) is closed as cancelled."""
        for approval_id in list(self._open):
            self._close(approval_id, "cancelled", "interrupt")

    def _close(self, approval_id: str, outcome: Outcome, by: str) -> None:
        # Between two calls (the consumer feeds events only then): nothing is in flight.
        entry = self._open.pop(approval_id, None)
        if entry is None:
            return
        if self.prompts is None:
            self._queue.append(SendPart(f"{outcome_line(outcome, by)} ({entry.name})"))
            return
        self.prompts.close(approval_id)
        # What of it has not gone out yet need not go: the request is over.
        if any(a.approval_id == approval_id for a in self._queue[:1]):
            self._tries = 0
        self._queue = [a for a in self._queue if a.approval_id != approval_id]
        if entry.message_id is not None:
            text = closed_text(outcome, by, entry.gist, limit=self.limit, unit=self.unit)
            self._queue.append(ClosePrompt(approval_id, entry.message_id, text))

    def landed(self, action: PromptAction, message_id: str = "") -> None:
        self._queue.pop(0)
        self._tries = 0
        entry = self._open.get(action.approval_id)
        if isinstance(action, SendPrompt) and entry is not None:
            entry.message_id = message_id

    def failed(self, action: PromptAction, *, retry: bool) -> None:
        """The call failed; ``retry`` (rate limited) keeps it at the head, up to ``ATTEMPTS``."""
        self._tries += 1
        if retry and self._tries < ATTEMPTS:
            return
        self._queue.pop(0)
        self._tries = 0

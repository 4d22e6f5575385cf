"""Elicitation: an MCP server asks the person for input in the middle of a tool call.

A server's ``elicitation/create`` (the ``mcp`` SDK client's ``elicitation_callback``,
``iris.agent.mcp.connection``) reaches the person of the turn whose call it came from: the
turn runs each tool call with an ``Asker`` in ``ASKER`` (its chat and its event stream), the
connection keeps the askers of its calls in flight, and ``Elicitations.ask`` emits an
``ElicitationRequested`` into that turn and waits for the answer. A surface answers with
``Elicitations.respond`` (the socket's ``elicitation.respond`` frame).

As the specification says: ``accept`` carries the content, which must fit the request's
schema — an answer that does not is refused with a reason (``ElicitationError``,
``elicitation_invalid``) and the request stays open, so the person is asked again; it is never
sent. ``decline`` and ``cancel`` carry none. A request nobody answers within the timeout
(``tools.approval.timeout``) is declined; a turn that cannot ask — its surface has no way to
(the API, a chat platform without buttons), or no single turn's call is in flight — declines
at once. An interrupted call cancels its open requests.

A request lives as long as the call that asked, in the memory of the process that runs it;
where processes share a store (``store.url``), also there (``iris.state.elicitations``): an
answer given to another process (``answer``) is checked against the schema there and written
once, and the asking process, which reads it every ``POLL`` seconds while it waits, sends it
on.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from iris.errors import StoreUnavailable
from iris.events import ElicitationRequested, ElicitationResolved, Event
from iris.state.elicitations import POLL, Given, OpenRequest, SharedElicitations

log = logging.getLogger(__name__)

Action = Literal["accept", "decline", "cancel"]
Emit = Callable[[Event], None]


class ElicitationError(Exception):
    """An answer that was not taken: ``code`` ``elicitation_unknown`` (no such request waits
    in this chat) or ``elicitation_invalid`` (the content does not fit the schema)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Answer:
    """What goes back to the server: ``content`` only with ``accept``."""

    action: Action
    content: dict[str, Any] | None = None


@dataclass(frozen=True, eq=False)
class Asker:
    """The turn a tool call belongs to: its chat, its event stream, the call's progress note
    (where a declined request says why), and the broker — None where the turn's surface
    cannot ask (the API, a chat platform without buttons)."""

    chat_id: str
    emit: Emit
    note: Callable[[str], None]
    broker: Elicitations | None
    # Tokens a server's request for the model used (``sampling``), added to the turn's usage.
    spend: Callable[[int, int], None] | None = None


# The asker of the tool call running in this task (set by the turn around each call).
ASKER: ContextVar[Asker | None] = ContextVar("ASKER", default=None)


@dataclass
class _Open:
    asker: Asker
    request: ElicitationRequested
    answer: asyncio.Future[tuple[Answer, str]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Elicitations:
    """The broker: open requests by id, each waiting for its answer."""

    def __init__(
        self,
        timeout: float = 120.0,
        clock: Callable[[], float] = time.time,
        shared: SharedElicitations | None = None,
    ) -> None:
        self.timeout = timeout
        self._clock = clock
        self._open: dict[str, _Open] = {}
        self.shared = shared  # with processes sharing a store: answers from any of them

    async def ask(
        self, asker: Asker, server: str, message: str, schema: dict[str, Any], url: str = ""
    ) -> Answer:
        """Ask the person of ``asker``'s turn; the answer (``decline`` at the timeout)."""
        request = ElicitationRequested(
            elicitation_id=f"elic_{uuid.uuid4().hex[:20]}",
            server=server,
            message=message,
            schema=schema,
            expires_at=self._clock() + self.timeout,
            url=url,
        )
        waiting = self._open[request.elicitation_id] = _Open(asker, request)
        shared = await self._share(waiting)
        asker.emit(request)
        try:
            async with asyncio.timeout(self.timeout):
                answer, by = await self._wait(waiting, shared)
        except TimeoutError:
            answer, by = Answer("decline"), "timeout"
        finally:
            self._open.pop(request.elicitation_id, None)
            if shared is not None:
                await _quietly(shared.close(request.elicitation_id))
        action = "timeout" if by == "timeout" else answer.action
        asker.emit(ElicitationResolved(request.elicitation_id, action, by))
        return answer

    async def _share(self, waiting: _Open) -> SharedElicitations | None:
        """Put the request in the shared store (None: none, or it is away: answers then reach
        this process only)."""
        request = waiting.request
        if self.shared is None:
            return None
        shared = OpenRequest(waiting.asker.chat_id, request.schema, request.url)
        if await _quietly(self.shared.open(request.elicitation_id, shared, self.timeout)):
            return self.shared
        return None

    async def _wait(self, waiting: _Open, shared: SharedElicitations | None) -> tuple[Answer, str]:
        """The answer given here, or (shared) to another process, read every ``POLL`` s."""
        if shared is None:
            return await waiting.answer
        while True:
            done, _ = await asyncio.wait({waiting.answer}, timeout=POLL)
            if done:
                return waiting.answer.result()
            try:
                given = await shared.answered(waiting.request.elicitation_id)
            except StoreUnavailable:
                continue  # an answer given here still arrives
            if given is not None:
                content = given.content if given.action == "accept" else None
                return Answer(cast(Action, given.action), content), given.by

    async def answer(
        self,
        elicitation_id: str,
        action: Action,
        content: dict[str, Any] | None,
        *,
        chat_id: str,
        by: str,
    ) -> None:
        """``respond``, for a request of this process or (shared store) of another one."""
        if elicitation_id in self._open or self.shared is None:
            self.respond(elicitation_id, action, content, chat_id=chat_id, by=by)
            return
        try:
            found = await self.shared.find(elicitation_id)
            if found is None or found.chat_id != chat_id:
                raise _unknown(elicitation_id)
            taken = _checked(found.schema, found.url, action, content)
            if not await self.shared.answer(elicitation_id, Given(*_parts(taken), by)):
                raise _unknown(elicitation_id)
        except StoreUnavailable as exc:
            raise ElicitationError(exc.code, exc.message) from exc

    def respond(
        self,
        elicitation_id: str,
        action: Action,
        content: dict[str, Any] | None,
        *,
        chat_id: str,
        by: str,
    ) -> None:
        """Answer an open request of ``chat_id``; raises ``ElicitationError`` when there is
        none, or when ``accept``'s content does not fit the schema (the request stays open)."""
        waiting = self._open.get(elicitation_id)
        if waiting is None or waiting.asker.chat_id != chat_id or waiting.answer.done():
            raise _unknown(elicitation_id)
        request = waiting.request
        waiting.answer.set_result((_checked(request.schema, request.url, action, content), by))

    def cancel(self, asker: Asker) -> None:
        """The call ``asker`` made ended (interrupted): its open requests are cancelled."""
        for waiting in list(self._open.values()):
            if waiting.asker is asker and not waiting.answer.done():
                waiting.answer.set_result((Answer("cancel"), "interrupt"))

    def open_requests(self, chat_id: str) -> list[ElicitationRequested]:
        """The requests waiting in ``chat_id`` (for a device that connects later)."""
        return [w.request for w in self._open.values() if w.asker.chat_id == chat_id]


def _unknown(elicitation_id: str) -> ElicitationError:
    return ElicitationError(
        "elicitation_unknown", f"no elicitation {elicitation_id!r} waits in this chat"
    )


def _checked(
    schema: dict[str, Any], url: str, action: Action, content: dict[str, Any] | None
) -> Answer:
    """The answer to send; ``elicitation_invalid`` when ``accept``'s content does not fit."""
    if action != "accept":
        return Answer(action)
    content = content or {}
    problem = schema_problem(schema, content)
    if problem is not None and not url:
        raise ElicitationError("elicitation_invalid", problem)
    return Answer("accept", None if url else content)


def _parts(answer: Answer) -> tuple[str, dict[str, Any] | None]:
    return answer.action, answer.content


async def _quietly(work: Awaitable[Any]) -> bool:
    """Shared-store work that may fail without failing the request (it stays this
    process's); whether it was done."""
    try:
        await work
    except StoreUnavailable as exc:
        log.warning("elicitation: %s", exc.message)
        return False
    return True


# -- the schema check (pure) ------------------------------------------------------------------

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}
_ARTICLE = {"integer": "an"}
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def choices(spec: dict[str, Any]) -> list[Any]:
    """The values a field may take when it is an enum (``enum``, or ``oneOf`` of ``const``),
    else []."""
    if isinstance(spec.get("enum"), list):
        return list(spec["enum"])
    options = spec.get("oneOf") or spec.get("anyOf")
    if isinstance(options, list):
        return [o["const"] for o in options if isinstance(o, dict) and "const" in o]
    return []


def schema_problem(schema: dict[str, Any], content: Any) -> str | None:
    """Why ``content`` does not fit an elicitation ``schema`` (a flat object of primitive
    fields, as the specification restricts it), or None when it does."""
    if not isinstance(content, dict):
        return "the answer must be an object of fields"
    fields: dict[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in content:
            return f"'{name}' is required"
    for name, value in content.items():
        spec = fields.get(name)
        if not isinstance(spec, dict):
            return f"'{name}' is not a field of this form"
        problem = _field_problem(spec, value)
        if problem is not None:
            return f"'{name}' {problem}"
    return None


def _field_problem(spec: dict[str, Any], value: Any) -> str | None:
    kind = spec.get("type", "string")
    allowed = choices(spec)
    if kind == "array":
        items = spec.get("items") if isinstance(spec.get("items"), dict) else {}
        options = choices(items or {})
        if not isinstance(value, list) or any(v not in options for v in value):
            return f"must be a list of: {', '.join(map(str, options))}"
        return None
    python = _TYPES.get(kind)
    # A bool is an int to Python, not a number to JSON.
    if (
        python is None
        or not isinstance(value, python)
        or (kind != "boolean" and isinstance(value, bool))
    ):
        return f"must be {_ARTICLE.get(kind, 'a')} {kind}"
    if allowed and value not in allowed:
        return f"must be one of: {', '.join(map(str, allowed))}"
    if isinstance(value, str):
        return _string_problem(spec, value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in spec and value < spec["minimum"]:
            return f"must be at least {spec['minimum']}"
        if "maximum" in spec and value > spec["maximum"]:
            return f"must be at most {spec['maximum']}"
    return None


def _string_problem(spec: dict[str, Any], value: str) -> str | None:
    if "minLength" in spec and len(value) < spec["minLength"]:
        return f"must be at least {spec['minLength']} characters"
    if "maxLength" in spec and len(value) > spec["maxLength"]:
        return f"must be at most {spec['maxLength']} characters"
    fmt = spec.get("format")
    if fmt == "email" and not _EMAIL.match(value):
        return "must be an email address"
    if fmt == "date" and not _DATE.match(value):
        return "must be a date (YYYY-MM-DD)"
    if fmt == "uri" and "://" not in value:
        return "must be a URI"
    return None

"""The approvals broker: tool calls waiting for a person's yes, the answers, the chats' allowances.

Which tools ask and what the model is told when one is refused are the agent's
(``iris.agent.approvals``: ``ApprovalPolicy``, the refusals); this module keeps the requests and
their answers. ``Approvals`` is the broker every surface and turn holds (``runtime.approvals``;
the REPL has its own), ``MemoryApprovals`` in this process's memory, ``RedisApprovals`` in the
shared store (``store.url``) so an answer given to any process reaches the turn;
``approvals_for`` picks one.

A turn about to run a tool that asks emits ``ApprovalRequested`` (``request``), awaits ``wait``
(interruptible: a cancelled wait closes the request as ``cancelled`` by ``interrupt``), then
emits ``ApprovalResolved``. A surface answers with ``respond(approval_id, decision, by)``: the
first answer wins (``decided``), a later one is told ``already_decided`` (``resolution`` says
what and by whom), an id nobody asked for is ``unknown``. A request not answered by its
``expires_at`` ends as ``timeout``. Decision ``chat`` lets that tool run unasked in the chat
for ``allow_ttl`` seconds, until ``new_session`` (``/new``) at the latest; an answer given with
a ``person`` (a group chat's presser, ``group_allow: person``) lets it run unasked only in the
turns that person asks for (``asks(..., person)``), not every member's.

**In Redis** (``RedisApprovals``): a request is one hash ``{approval:<id>}:request`` whose
``resolution`` field is set once by a script (the first answer, the timeout or the cancel,
whichever comes first, in one atomic step); the waiting process wakes at once for an answer
given to itself and reads the field every ``POLL`` seconds for one given elsewhere. A chat's
``chat`` allowances are the set ``{chat:<id>}:approved`` (members ``tool`` or ``tool@person``;
it expires ``allow_ttl`` after the last grant), and its waiting requests ``{chat:<id>}:approvals``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, get_args

from iris.events import ApprovalRequested, ApprovalResolved
from iris.state.redis_store import RedisStore, translated
from iris.tasks import stop_if_cancelled

if TYPE_CHECKING:
    from redis.typing import EncodableT, FieldT

Decision = Literal["once", "chat", "deny"]  # what a person may answer
Outcome = Literal["once", "chat", "deny", "timeout", "cancelled"]  # how a request ended
RespondResult = Literal["decided", "already_decided", "unknown"]
DECISIONS: tuple[Decision, ...] = get_args(Decision)

POLL = 0.2  # seconds between two reads of a shared request's resolution
KEPT = 1024  # resolved requests a process remembers (for "already decided by …")
KEPT_S = 3600  # seconds a shared request outlives its expiry


class Rules(Protocol):
    """What the broker needs of ``tools.approval`` (``iris.agent.approvals.ApprovalPolicy``)."""

    @property
    def timeout(self) -> float: ...

    @property
    def allow_ttl(self) -> float: ...

    def asks(self, tool_name: str, also: tuple[str, ...] = ()) -> bool: ...


def preview(name: str, args: dict[str, Any]) -> str:
    """A person's view of a call: ``terminal``'s whole command, else the arguments as indented
    JSON (never cut: a surface that cannot show it all sends it as a file)."""
    command = args.get("command")
    if name == "terminal" and isinstance(command, str):
        return command
    if name == "ha_call_service":
        return _service_call(args)
    return json.dumps(args, indent=2, ensure_ascii=False)


def _service_call(args: dict[str, Any]) -> str:
    """A Home Assistant service call as its approver reads it: service, targets, data."""
    target = args.get("entity_id")
    items = cast(list[object], target) if isinstance(target, list) else [target]
    targets = ", ".join(str(t) for t in items if t) or "(no target)"
    head = f"{args.get('domain')}.{args.get('service')} → {targets}"
    data = args.get("data")
    if isinstance(data, dict) and data:
        return f"{head}\n{json.dumps(data, indent=2, ensure_ascii=False)}"
    return head


@dataclass(frozen=True, slots=True)
class Resolution:
    approval_id: str
    decision: Outcome
    by: str
    person: str = ""  # a ``chat`` answer scoped to this person's turns ("": the whole chat)

    def event(self) -> ApprovalResolved:
        return ApprovalResolved(self.approval_id, self.decision, self.by)

    @classmethod
    def written(cls, approval_id: str, outcome: str, by: str) -> Resolution:
        """From what a write records: ``<decision>[@<person>]`` and who."""
        decision, _, person = outcome.partition("@")
        return cls(approval_id, cast(Outcome, decision), by, person)


@dataclass
class _Waiting:
    chat_id: str
    request: ApprovalRequested
    answered: asyncio.Event = field(default_factory=asyncio.Event)


class Approvals(ABC):
    """The broker: requests waiting for an answer, the answers, the chats' allowances. The
    turn's side (``asks``, ``request``, ``wait``) and the answer's checks are the same for every
    store; where a request, its resolution and the allowances are kept is each store's."""

    poll: float | None = None  # seconds between reads of an answer given elsewhere (None: never)

    def __init__(self, policy: Rules, *, clock: Callable[[], float] = time.time) -> None:
        self.policy = policy
        self._clock = clock
        self._waiting: dict[str, _Waiting] = {}
        self._resolved: OrderedDict[str, Resolution] = OrderedDict()
        self._chats: dict[str, str] = {}  # the chat of each request in ``_resolved``

    # -- what asks ---------------------------------------------------------------------------
    async def asks(
        self, chat_id: str, tool_name: str, also: tuple[str, ...] = (), person: str = ""
    ) -> bool:
        """Does this call wait: the policy asks and the chat did not allow the tool already
        (for everyone, or for ``person``, who asked for the turn)."""
        if not self.policy.asks(tool_name, also):
            return False
        allowed = await self._allowances(chat_id)
        return tool_name not in allowed and not (person and f"{tool_name}@{person}" in allowed)

    def request(
        self, index: int, name: str, args: dict[str, Any], *, where: str | None = None
    ) -> ApprovalRequested:
        """A new request for call ``index`` (expires ``policy.timeout`` seconds from now).
        ``where``: how the call will run ("in the sandbox: …", "on the host"), the preview's
        last line on every surface."""
        shown = preview(name, args)
        return ApprovalRequested(
            index=index,
            name=name,
            args=json.dumps(args, ensure_ascii=False),
            preview=f"{shown}\n\n(runs {where})" if where else shown,
            approval_id=f"appr_{uuid.uuid4().hex[:20]}",
            expires_at=self._clock() + self.policy.timeout,
        )

    # -- the turn's side ---------------------------------------------------------------------
    async def ask(self, chat_id: str, request: ApprovalRequested) -> Outcome:
        """Wait for the answer to ``request`` (already emitted by the turn). Cancelling the wait
        closes the request as ``cancelled`` by ``interrupt``; past ``expires_at`` it is
        ``timeout``. Decision ``chat`` is remembered for the chat before this returns."""
        return (await self.wait(chat_id, request)).decision

    async def open(self, chat_id: str, request: ApprovalRequested) -> None:
        """Keep ``request`` where every process reads it, before the turn shows it: a device
        that sees it and answers (or resumes) on another process at once finds it there.
        ``wait`` follows; it opens the request itself where this was not called."""
        approval_id = request.approval_id
        self._waiting[approval_id] = _Waiting(chat_id, request)
        try:
            await self._open(chat_id, request)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                await self._interrupted(approval_id)
            self._waiting.pop(approval_id, None)
            raise

    async def abandon(self, approval_id: str) -> None:
        """Close an opened request nobody could be shown (``cancelled`` by ``unreachable``)."""
        try:
            await self._close(approval_id, "cancelled", "unreachable")
        finally:
            self._waiting.pop(approval_id, None)

    async def wait(self, chat_id: str, request: ApprovalRequested) -> Resolution:
        """``ask``, returning who decided too (for ``ApprovalResolved``)."""
        approval_id = request.approval_id
        if approval_id not in self._waiting:
            await self.open(chat_id, request)
        waiting = self._waiting[approval_id]
        try:
            resolution = await self._wait(waiting)
        except asyncio.CancelledError:
            await self._interrupted(approval_id)
            raise
        finally:
            self._waiting.pop(approval_id, None)
        if resolution.decision == "chat":
            await self._allow(chat_id, request.name, resolution.person)
        return resolution

    async def _wait(self, waiting: _Waiting) -> Resolution:
        approval_id = waiting.request.approval_id
        while True:
            left = waiting.request.expires_at - self._clock()
            if left <= 0:
                return await self._close(approval_id, "timeout", "timeout")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left if self.poll is None else min(left, self.poll)):
                    await waiting.answered.wait()
            found = await self.resolution(approval_id)
            stop_if_cancelled()  # the turn stopped waiting as the store answered
            if found is not None:
                return found

    async def _interrupted(self, approval_id: str) -> None:
        """The turn stopped waiting (an interrupt): the request ends ``cancelled``, even while
        the turn itself is being cancelled; a store that fails here changes nothing."""
        with contextlib.suppress(Exception):
            await asyncio.shield(self._close(approval_id, "cancelled", "interrupt"))

    async def _close(self, approval_id: str, outcome: Outcome, by: str) -> Resolution:
        """End a request the turn gives up on, unless an answer won first: what won."""
        await self._write(approval_id, outcome, by)
        found = await self.resolution(approval_id)
        return found or Resolution(approval_id, outcome, by)

    # -- the surfaces' side ------------------------------------------------------------------
    async def respond(
        self,
        approval_id: str,
        decision: Decision,
        by: str,
        *,
        chat_id: str | None = None,
        person: str = "",
    ) -> RespondResult:
        """A person's answer. The first one wins; a later one gets ``already_decided``.
        ``chat_id``: the chat the answer comes from; a request of another chat is ``unknown``
        to it. ``person``: a ``chat`` answer holds for this person's turns only (a group)."""
        if decision not in DECISIONS:
            raise ValueError(f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
        if chat_id is not None and await self.chat_of(approval_id) != chat_id:
            return "unknown"
        scoped = f"{decision}@{person}" if decision == "chat" and person else decision
        return await self._write(approval_id, scoped, by)

    async def chat_of(self, approval_id: str) -> str | None:
        """The chat a request was asked in (None: unknown here)."""
        waiting = self._waiting.get(approval_id)
        if waiting is not None:
            return waiting.chat_id
        return self._chats.get(approval_id)

    async def resolution(self, approval_id: str) -> Resolution | None:
        """How a request ended (None: still waiting, or never asked here)."""
        return self._resolved.get(approval_id)

    @abstractmethod
    async def pending(self, chat_id: str) -> list[ApprovalRequested]:
        """The chat's requests still waiting, oldest first (for a device that reconnects or a
        platform that draws its buttons again)."""

    @abstractmethod
    def pending_now(self, chat_id: str) -> list[ApprovalRequested]:
        """``pending`` without awaiting, for a device's ``sync`` (the frame log's reads are
        synchronous too)."""

    @abstractmethod
    async def new_session(self, chat_id: str) -> None:
        """The chat started over (``/new``): its ``chat`` allowances end."""

    # -- what each store keeps ---------------------------------------------------------------
    @abstractmethod
    async def _open(self, chat_id: str, request: ApprovalRequested) -> None:
        """Keep a request the turn starts waiting on."""

    @abstractmethod
    async def _write(self, approval_id: str, outcome: str, by: str) -> RespondResult:
        """Record ``outcome`` (``chat@person`` for a scoped allowance) unless the request ended
        already: the first write wins."""

    @abstractmethod
    async def _allowances(self, chat_id: str) -> set[str]:
        """The chat's ``chat`` allowances still running: ``tool`` or ``tool@person``."""

    @abstractmethod
    async def _allow(self, chat_id: str, tool_name: str, person: str = "") -> None:
        """Let ``tool_name`` run unasked in the chat (in ``person``'s turns only, if named)."""

    def _remember(self, resolution: Resolution, chat_id: str | None = None) -> None:
        self._resolved[resolution.approval_id] = resolution
        if chat_id is not None:
            self._chats[resolution.approval_id] = chat_id
        while len(self._resolved) > KEPT:
            gone, _ = self._resolved.popitem(last=False)
            self._chats.pop(gone, None)

    def _waiting_in(self, chat_id: str) -> list[ApprovalRequested]:
        found = [w.request for w in self._waiting.values() if w.chat_id == chat_id]
        return sorted(found, key=lambda r: r.expires_at)


class MemoryApprovals(Approvals):
    """Requests and allowances in this process's memory: an answer reaches a turn of this
    process only (no shared store, or the REPL)."""

    def __init__(self, policy: Rules, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(policy, clock=clock)
        self._allowed: dict[str, dict[str, float]] = {}  # chat -> allowance -> until

    async def pending(self, chat_id: str) -> list[ApprovalRequested]:
        return self._waiting_in(chat_id)

    def pending_now(self, chat_id: str) -> list[ApprovalRequested]:
        return self._waiting_in(chat_id)

    async def new_session(self, chat_id: str) -> None:
        self._allowed.pop(chat_id, None)

    async def _open(self, chat_id: str, request: ApprovalRequested) -> None:
        return None  # the wait in ``_waiting`` is the whole record

    async def _write(self, approval_id: str, outcome: str, by: str) -> RespondResult:
        if approval_id in self._resolved:
            return "already_decided"
        waiting = self._waiting.get(approval_id)
        if waiting is None:
            return "unknown"
        self._remember(Resolution.written(approval_id, outcome, by), waiting.chat_id)
        waiting.answered.set()
        return "decided"

    async def _allowances(self, chat_id: str) -> set[str]:
        now = self._clock()
        kept = self._allowed.get(chat_id, {})
        for gone in [name for name, until in kept.items() if until <= now]:
            del kept[gone]
        return set(kept)

    async def _allow(self, chat_id: str, tool_name: str, person: str = "") -> None:
        member = f"{tool_name}@{person}" if person else tool_name
        self._allowed.setdefault(chat_id, {})[member] = self._clock() + self.policy.allow_ttl


# KEYS[1] the request's hash. ARGV[1] the resolution ("<decision> <by>"). Returns "unknown",
# "decided" or "already_decided": the first resolution written wins, in one step.
_RESOLVE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'unknown' end
if redis.call('HSETNX', KEYS[1], 'resolution', ARGV[1]) == 1 then return 'decided' end
return 'already_decided'
"""


class RedisApprovals(Approvals):
    """Requests and allowances in the shared store: any process answers, the asking one wakes
    at once for its own answers and polls for the others'."""

    poll = POLL

    def __init__(
        self, policy: Rules, shared: RedisStore, *, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(policy, clock=clock)
        self._shared = shared
        self._resolve = shared.aio.register_script(_RESOLVE)

    async def chat_of(self, approval_id: str) -> str | None:
        chat = await super().chat_of(approval_id)
        if chat is not None:
            return chat
        with translated(self._shared.url):
            found = await self._shared.aio.hget(self._key(approval_id), "chat")
        return None if found is None else cast(str, found)

    async def resolution(self, approval_id: str) -> Resolution | None:
        found = await super().resolution(approval_id)
        if found is not None:
            return found
        with translated(self._shared.url):
            raw = await self._shared.aio.hget(self._key(approval_id), "resolution")
        if raw is None:
            return None
        outcome, _, by = cast(str, raw).partition(" ")
        found = Resolution.written(approval_id, outcome, by)
        self._remember(found)
        return found

    async def pending(self, chat_id: str) -> list[ApprovalRequested]:
        shared, index = self._shared, self._chat_key(chat_id, "approvals")
        out: list[ApprovalRequested] = []
        with translated(shared.url):
            for approval_id in cast(set[str], await shared.aio.smembers(index)):
                kept = cast(dict[str, str], await shared.aio.hgetall(self._key(approval_id)))
                if not kept:
                    await shared.aio.srem(index, approval_id)
                elif self._open_request(kept):
                    out.append(_request(json.loads(kept["request"])))
        return sorted(out, key=lambda r: r.expires_at)

    def pending_now(self, chat_id: str) -> list[ApprovalRequested]:
        """Through the store's sync client."""
        shared, index = self._shared, self._chat_key(chat_id, "approvals")
        out: list[ApprovalRequested] = []
        with translated(shared.url):
            for approval_id in cast(set[str], shared.sync.smembers(index)):
                kept = cast(dict[str, str], shared.sync.hgetall(self._key(approval_id)))
                if kept and self._open_request(kept):
                    out.append(_request(json.loads(kept["request"])))
        return sorted(out, key=lambda r: r.expires_at)

    async def new_session(self, chat_id: str) -> None:
        with translated(self._shared.url):
            await self._shared.aio.delete(self._chat_key(chat_id, "approved"))

    def _open_request(self, kept: dict[str, str]) -> bool:
        return "resolution" not in kept and float(kept["expires_at"]) > self._clock()

    def _key(self, approval_id: str) -> str:
        return self._shared.tagged_key(f"approval:{approval_id}", "request")

    def _chat_key(self, chat_id: str, suffix: str) -> str:
        return self._shared.chat_key(chat_id, suffix)

    async def _open(self, chat_id: str, request: ApprovalRequested) -> None:
        shared, key = self._shared, self._key(request.approval_id)
        ttl = max(1, int(request.expires_at - self._clock()) + KEPT_S)
        record: dict[FieldT, EncodableT] = {
            "chat": chat_id,
            "request": json.dumps(_fields(request)),
            "expires_at": repr(request.expires_at),
        }
        with translated(shared.url):
            await shared.aio.hset(key, mapping=record)
            await shared.aio.expire(key, ttl)
            chat = self._chat_key(chat_id, "approvals")
            await shared.aio.sadd(chat, request.approval_id)
            await shared.aio.expire(chat, ttl)

    async def _write(self, approval_id: str, outcome: str, by: str) -> RespondResult:
        with translated(self._shared.url):
            result = await self._resolve(keys=[self._key(approval_id)], args=[f"{outcome} {by}"])
        waiting = self._waiting.get(approval_id)
        if waiting is not None:
            waiting.answered.set()
        return cast(RespondResult, result)

    async def _allowances(self, chat_id: str) -> set[str]:
        with translated(self._shared.url):
            found = await self._shared.aio.smembers(self._chat_key(chat_id, "approved"))
        return cast(set[str], found)

    async def _allow(self, chat_id: str, tool_name: str, person: str = "") -> None:
        member = f"{tool_name}@{person}" if person else tool_name
        key = self._chat_key(chat_id, "approved")
        with translated(self._shared.url):
            await self._shared.aio.sadd(key, member)
            await self._shared.aio.expire(key, max(1, int(self.policy.allow_ttl)))


def approvals_for(
    policy: Rules, shared: RedisStore | None, *, clock: Callable[[], float] = time.time
) -> Approvals:
    """This process's memory, or with a shared store (``store.url``) Redis, which every
    process answers through."""
    if shared is None:
        return MemoryApprovals(policy, clock=clock)
    return RedisApprovals(policy, shared, clock=clock)


def _fields(request: ApprovalRequested) -> dict[str, Any]:
    return {
        "index": request.index,
        "name": request.name,
        "args": request.args,
        "preview": request.preview,
        "approval_id": request.approval_id,
        "expires_at": request.expires_at,
    }


def _request(data: dict[str, Any]) -> ApprovalRequested:
    return ApprovalRequested(
        index=int(data["index"]),
        name=str(data["name"]),
        args=str(data["args"]),
        preview=str(data["preview"]),
        approval_id=str(data["approval_id"]),
        expires_at=float(data["expires_at"]),
    )

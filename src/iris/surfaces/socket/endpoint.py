"""The iris WebSocket transport: ``GET /iris/ws``, one task pair per connected device.

Connect, authenticate (``Authorization: Bearer <token>``, else a first ``hello`` frame within
``HELLO_TIMEOUT``; a config token or a paired device's, see ``access``), then two loops run
until the device goes: the sender writes whatever the device's subscription yields; the
receiver parses the device's frames and acts on them. Bad input gets an ``error`` frame and
nothing else happens; more than ``BAD_FRAMES_PER_MINUTE`` closes the socket with 1008. A bad
or missing token closes with 4401 (reason ``unauthorized``, or ``revoked`` for a revoked
device's token) before anything is sent; with no config token and no paired device every device
is refused (secure by default). A device revoked while connected is closed with 4401
``revoked`` within ``REVOCATION_POLL`` seconds.

Nothing a device does can grow the server without bound: its outbound queue holds every frame
kind within ``platforms.iris.queue_size`` (see ``Subscription``) and a device that overruns it
with its own answers is closed with 4008; its inbound frames are budgeted (``INBOUND_RATE`` a
second, ``INBOUND_BURST`` at once): a frame over the budget is dropped with one ``rate_limited``
error, and a flood that goes on past another ``INBOUND_BURST`` frames is closed with 4029. A
store that fails answers ``store_unavailable``; any other fault in handling a frame answers
``internal_error`` — the socket never drops without a close frame.

A ``message.send`` whose text is a chat command (``/new``, ``/stop``, ``/model``, ``/reasoning``,
``/compact``, ``/status``, ``/help``; see ``iris.surfaces.commands``) is not a turn: it is
answered to the sending device alone with a connection-scoped ``command`` frame, is not echoed
to other devices and never reaches the model or the history. Any other ``/word`` is a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections import deque
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, assert_never

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from iris.agent.elicitation import Action, ElicitationError
from iris.agent.mcp import SignInFailed
from iris.auth_throttle import client_address
from iris.errors import StoreUnavailable
from iris.events import ApprovalRequested, ApprovalResolved
from iris.fanout.framelog import frame_log_for
from iris.fanout.hub import Hub
from iris.fanout.redis_log import RedisFrameLog
from iris.fanout.rules import Frame
from iris.fanout.subscription import Subscription, TooSlow, encode_frame
from iris.fanout.tailer import Tailer
from iris.observability import metrics
from iris.protocol import inbound
from iris.protocol import types as protocol
from iris.protocol.appends import FEATURE as APPEND
from iris.protocol.appends import AppendWriter
from iris.protocol.frames import approval_request, approval_resolved
from iris.protocol.types import RULES, Error, Pong, Ready
from iris.runtime import Runtime
from iris.state.approvals import Decision
from iris.state.devices import Check
from iris.state.push import new_subscription
from iris.state.turn_owners import turn_owners_for
from iris.surfaces import signin_command
from iris.surfaces.actions import CommandTarget, execute
from iris.surfaces.commands import Command, parse
from iris.surfaces.origin import SiteGuard
from iris.surfaces.prompts_command import fetched, wants_run
from iris.surfaces.schedule_commands import Desk
from iris.surfaces.scheduler import Delivery, Run
from iris.surfaces.socket import chats
from iris.surfaces.socket.access import REVOCATION_POLL, Revocations, TokenGate, bearer
from iris.surfaces.socket.flood import FrameBucket
from iris.surfaces.socket.notifier import Notifier, allowed_endpoint, vapid_key
from iris.surfaces.socket.room import (
    INTERRUPTED,
    OWNER_LOST,
    ChatRoom,
    Scheduled,
    encoder_settings,
)
from iris.tasks import OpenGroup, logged, task_group

log = logging.getLogger(__name__)

DEFAULT_CHAT = "main"  # every device of the same owner shares one conversation by default
HELLO_TIMEOUT = 10.0
BAD_FRAMES_PER_MINUTE = 20
INBOUND_RATE = 20.0  # frames a second a device may send, sustained
INBOUND_BURST = 100  # ... and at once
CLOSE_UNAUTHORIZED = 4401
HOUSEKEEPING_EVERY = 60.0  # seconds between two trims of idle chats' logs
CLOSE_THROTTLED = 4429  # too many failed authentications from the address (iris.auth_throttle)
CLOSE_BAD_REQUEST = 4400  # a malformed query parameter on an authenticated connection
CLOSE_TOO_SLOW = 4008  # over its queue bound with frames that cannot be re-read later
CLOSE_RATE_LIMITED = 4029  # kept sending far over its inbound budget
CLOSE_POLICY = 1008
CLOSE_INTERNAL = 1011  # a fault of the server's (it is logged)
CLOSE_TRY_LATER = 1013  # the store failed where the device cannot go on without a gap
TOO_SLOW = "too slow: frames waiting past the queue bound"
CLOSE_WAIT = 2.0  # seconds a close waits on a device's socket (one that stopped reading)


@dataclass(frozen=True, slots=True)
class _Refusal:
    code: int
    reason: str


class SocketSurface:
    """The iris socket (``/iris/ws``): the surface the web app, the terminal app and the
    devices talk to. Its config section is ``platforms.iris`` (a section is named for what it
    configures from the user's side; the code calls the surface by its transport)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.config.platforms.iris
        settings = self.settings
        # With a shared store every process appends to one log per chat, and a tailer brings
        # here what the others appended; without one, the log is this process's SQLite file.
        log = frame_log_for(
            runtime.store,
            runtime.shared,
            rules=RULES,
            max_frames=settings.log_max_frames,
            max_age=settings.log_max_age,
        )
        self.hub = Hub(log, queue_size=settings.queue_size)
        self.hub.open_approvals = self._open_approvals
        runtime.show_approval = self._show_approval  # a voice turn's, on its owner chat
        self.tailer: Tailer | None = None
        if isinstance(log, RedisFrameLog) and runtime.shared is not None:
            self.tailer = Tailer(runtime.shared, log, self.hub)
        self.rooms: dict[str, ChatRoom] = {}
        # With a shared store: who runs each chat's turn across processes (None: this one).
        self.owners = turn_owners_for(runtime.shared, runtime.config.store.lease)
        self._ownership: list[asyncio.Task[None]] = []  # its inbox reader and reaper
        self.site = SiteGuard(runtime.config.server)
        self.gate = TokenGate(self.settings.tokens, runtime.devices)
        self.revocations = Revocations(runtime.devices)
        self._watcher: asyncio.Task[None] | None = None
        self._housekeeping: asyncio.Task[None] | None = None
        self.housekeeping_every = HOUSEKEEPING_EVERY
        self._tailing: asyncio.Task[None] | None = None
        # The rooms' turns and the revocation watch, from start to stop (one task: the
        # server's lifespan).
        self._tasks = OpenGroup()
        self.notifier: Notifier | None = None  # Web Push (platforms.iris.push), from start

    def _open_approvals(self, chat_id: str) -> list[Frame]:
        """The chat's approval requests still open, for a ``sync``: a device that resumes past
        the log's reach still sees what waits for its yes (on any process: the broker's)."""
        requests = self.runtime.approvals.pending_now(chats.session_key(chat_id))
        frames = (approval_request(request) for request in requests)
        return [{k: v for k, v in f.items() if k != "type"} for f in frames]

    def _show_approval(self, chat_id: str, event: ApprovalRequested | ApprovalResolved) -> None:
        """An approval asked outside the chat's own turns (a voice turn's, from Home
        Assistant) on the chat's devices, as a turn's would be: the request (with Web Push),
        then how it ended. Answered as any other: ``approval.respond`` on the chat."""
        if isinstance(event, ApprovalRequested):
            self.hub.publish(chat_id, approval_request(event))
            self._notify(chat_id, "approval", f"{event.name} waits for your approval", "")
        else:
            self.hub.publish(chat_id, approval_resolved(event))

    def routes(self) -> list[BaseRoute]:
        return [
            WebSocketRoute("/iris/ws", self._endpoint),
            Route("/iris/push.json", self._push_key, methods=["GET"]),
            signin_command.callback_route(self.runtime.agent),
            chats.route(self.runtime.sessions, self.gate, self.site, self.runtime.guard),
        ]

    async def _push_key(self, _: Request) -> JSONResponse:
        """The public VAPID key a browser subscribes with (nothing secret)."""
        if self.notifier is None:
            return JSONResponse({"enabled": False})
        return JSONResponse({"enabled": True, "public_key": self.notifier.public_key})

    def _notify(self, chat_id: str, kind: str, text: str, message_id: str) -> None:
        """Web Push for what happened in a chat: a finished reply only when no device of the
        chat is connected here; an approval that waits and a scheduled run always."""
        notifier = self.notifier
        if notifier is None or (kind == "reply" and self.hub.subscriptions(chat_id)):
            return
        title = {"approval": "Approval needed", "scheduled": "⏰ Scheduled run"}.get(kind, "Iris")
        work = notifier.notify(chat_id, title, text, message_id)
        self._tasks.create_task(logged(_pushed(work), f"push for {chat_id}"))

    async def start(self) -> None:
        await self._tasks.open()
        signin_command.quiet_access_log()
        if self.settings.push.enabled and self.runtime.push is not None:
            folder = self.runtime.config.store.resolved_path().parent
            self.notifier = Notifier(self.runtime.push, vapid_key(folder))
        # Turns a crash cut are closed now, on devices and in the model's history alike.
        for chat_id in await self.hub.log.open_turns():
            self.room(chat_id)
        if not self.gate.configured and not await self.gate.devices.any_paired():
            log.warning(
                "no device may connect: platforms.iris.tokens is empty and no device is "
                "paired; pair one with `iris devices add NAME`"
            )
        self._watcher = self._tasks.create_task(self.revocations.run(REVOCATION_POLL))
        self._housekeeping = self._tasks.create_task(logged(self._housekeep(), "housekeeping"))
        if self.tailer is not None:
            self._tailing = self._tasks.create_task(self.tailer.run(), name="iris-tailer")
        if self.owners is not None:
            self._ownership = [
                self._tasks.create_task(logged(self.owners.listen(self._cancel_asked), "inbox")),
                self._tasks.create_task(logged(self.owners.reap(self._owner_lost), "reaper")),
            ]

    async def _housekeep(self) -> None:
        """Every ``housekeeping_every`` seconds: the log bounds applied to idle chats too
        (``log_max_age`` holds for a chat nobody writes to)."""
        while True:
            await asyncio.sleep(self.housekeeping_every)
            self.drop_idle_rooms()
            try:
                await self.hub.log.prune_idle()
            except StoreUnavailable as exc:
                log.warning("the frame logs were not trimmed: %s", exc.message)

    def drop_idle_rooms(self) -> int:
        """Drop the rooms with no device here and nothing under way (finding 8 of the second
        hardening pass: 10 000 unused chat ids cost ~300 B each for ever); the next hello on
        one builds it again from the log. Returns how many were dropped."""
        idle = [
            chat_id
            for chat_id, room in self.rooms.items()
            if room.idle and not self.hub.subscriptions(chat_id)
        ]
        for chat_id in idle:
            del self.rooms[chat_id]
            self.hub.forget(chat_id)
        return len(idle)

    async def stop(self) -> None:
        housekeeping, self._housekeeping = self._housekeeping, None
        if housekeeping is not None:
            housekeeping.cancel()  # it sleeps between rounds: nothing to wait for
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()  # it sleeps between sweeps: nothing to wait for
        tailing, self._tailing = self._tailing, None
        if tailing is not None:
            tailing.cancel()  # it waits on the store: nothing to wait for
        for task in self._ownership:
            task.cancel()  # they wait on Redis or sleep: nothing to wait for
        self._ownership = []
        try:
            await asyncio.gather(*(room.close() for room in self.rooms.values()))
        finally:
            await self._tasks.close()  # every turn has ended: the group has nothing to wait on

    def room(self, chat_id: str) -> ChatRoom:
        """The chat's room; raises ``StoreUnavailable`` if a new room cannot read its log."""
        if chat_id not in self.rooms:
            room = ChatRoom(self.runtime, self.hub, chat_id, self._tasks, self.owners)
            room.notify = functools.partial(self._notify, chat_id)
            # Before it counts as open: a failed recovery is tried again. With a shared store a
            # turn left open had an owner whose lease ran out, whoever it was.
            room.recover(INTERRUPTED if self.owners is None else OWNER_LOST)
            self.rooms[chat_id] = room
        return self.rooms[chat_id]

    # -- scheduled runs (iris.surfaces.scheduler) ---------------------------------------------
    run_targets = ("iris",)

    def ready(self, target: Mapping[str, Any]) -> bool:
        """Any process can run an iris chat's scheduled run (its turn lease decides where)."""
        return True

    async def run(self, run: Run) -> Delivery:
        """A scheduled run: a turn of the chat's room, its ``message.start`` marked with the
        schedule's id, kept in the chat's log for every device (now or on its next resume)."""
        chat_id = str(run.schedule.target["chat_id"])
        try:
            room = self.room(chat_id)
            done = await room.run_scheduled(run.schedule.text, Scheduled(run.schedule.id, run.note))
        except StoreUnavailable as exc:
            return Delivery("undelivered", exc.message)
        return Delivery("delivered") if done else Delivery("undelivered", "the turn was lost")

    def desk(self, room: ChatRoom, device: str) -> Desk | None:
        """A chat's schedules, for its commands (None: the store keeps none)."""
        runtime = self.runtime
        if runtime.schedules is None:
            return None
        target = {"surface": "iris", "chat_id": room.chat_id}
        return Desk(
            runtime.schedules,
            runtime.config.schedules,
            room.session,
            f"iris:{device}",
            target,
            added=runtime.schedule_added,
        )

    def _owner_lost(self, chat_id: str) -> None:
        """The reaper found the chat's turn owner gone: close its turn (if nobody has)."""
        room = self.rooms.get(chat_id)
        if room is None:
            self.room(chat_id)  # a new room recovers the chat
        else:
            room.recover(OWNER_LOST)

    def _cancel_asked(self, chat_id: str, token: str) -> None:
        """Another process passed on a ``turn.cancel`` or ``/stop`` for a turn running here."""
        room = self.rooms.get(chat_id)
        if room is not None:
            room.cancel_held(token)

    # -- one connection ------------------------------------------------------------------------
    async def _endpoint(self, ws: WebSocket) -> None:
        if self.site.refusal(ws.headers, ws.scope.get("server"), ws.scope["scheme"]):
            await ws.close(CLOSE_POLICY)  # before accept: the handshake is answered 403
            return
        await ws.accept()
        try:
            await self._serve(ws)
        except Exception:  # a fault of ours still ends in a close frame, not a dropped socket
            log.exception("iris connection failed")
            await _close(ws, CLOSE_INTERNAL, "internal error")

    async def _serve(self, ws: WebSocket) -> None:
        guard, address = self.runtime.guard, client_address(ws.scope)
        wait = guard.refused(address, "iris")
        if (
            wait is not None
        ):  # guessing: too many wrong tokens from this address (iris.auth_throttle)
            await _close(
                ws,
                CLOSE_THROTTLED,
                f"too many failed authentications; retry in {math.ceil(wait)} s",
            )
            return
        caller = await self._authenticate(ws)
        if isinstance(caller, _Refusal):
            if caller.code == CLOSE_UNAUTHORIZED:
                guard.failed(address, "iris")
            await _close(ws, caller.code, caller.reason)
            return
        hello, check = caller
        device = check.digest
        chat_id = hello.chat_id or DEFAULT_CHAT
        try:
            room = self.room(chat_id)
            appends = APPEND in (hello.features or ())
            writer = AppendWriter() if appends else None
            subscription = self.hub.subscribe(chat_id, writer=writer)
        except StoreUnavailable as exc:
            await _store_failed(ws, chat_id, hello.after_seq or 0, exc)
            return
        try:
            subscription.send_local(_ready(hello.features, self.hub.log.epoch(chat_id)))
            if hello.after_seq is not None:
                subscription.resume(hello.after_seq)
        except StoreUnavailable as exc:  # no replay: going live would leave the device a gap
            self.hub.unsubscribe(subscription)
            await _store_failed(ws, chat_id, hello.after_seq or 0, exc)
            return
        connection = _Connection(self, ws, room, subscription, hello.token, check.name)
        forget = None if device is None else self.revocations.watch(device, connection.revoke)
        metrics.socket_connected(1)
        try:
            await connection.run()
        finally:
            metrics.socket_connected(-1)
            self.hub.unsubscribe(subscription)
            if forget is not None:
                forget()

    async def _authenticate(self, ws: WebSocket) -> tuple[inbound.Hello, Check] | _Refusal:
        """The device's ``hello`` and its token's check (``digest`` None: a config token), or a
        refusal."""
        header = ws.headers.get("authorization", "")
        if header:
            token = bearer(header) or ""
            admitted = await self._admit(token)
            if isinstance(admitted, _Refusal):
                return admitted
            query = ws.query_params
            chat_id, after = query.get("chat_id"), query.get("after_seq")
            if chat_id is not None and not inbound.valid_chat_id(chat_id):
                return _Refusal(CLOSE_BAD_REQUEST, "chat_id must be 1-128 of A-Z a-z 0-9 . _ : @ -")
            after_seq = None if after is None else inbound.parse_seq(after)
            if after is not None and after_seq is None:
                return _Refusal(CLOSE_BAD_REQUEST, "after_seq must be an integer >= 0")
            named = query.get("features")
            features = None if named is None else inbound.parse_features(named)
            if named is not None and features is None:
                return _Refusal(CLOSE_BAD_REQUEST, "features must be a comma-separated list")
            return inbound.Hello(token, chat_id, after_seq, features), admitted
        unauthorized = _Refusal(CLOSE_UNAUTHORIZED, "unauthorized")
        try:
            async with asyncio.timeout(HELLO_TIMEOUT):
                message = await ws.receive()
        except TimeoutError:
            return unauthorized
        if message["type"] != "websocket.receive":
            return unauthorized
        payload = _payload(message)
        request = inbound.parse(payload, max_text=self.settings.max_text)
        if isinstance(request, inbound.BadFrame) and inbound.bad_hello_field(payload, request):
            # A hello whose token may be fine but whose after_seq, chat_id or features is not:
            # its own close code (an app told "unauthorized" would ask for a new token).
            return _Refusal(CLOSE_BAD_REQUEST, request.message[:120])
        if not isinstance(request, inbound.Hello):
            return unauthorized
        admitted = await self._admit(request.token)
        return admitted if isinstance(admitted, _Refusal) else (request, admitted)

    async def _admit(self, token: str) -> Check | _Refusal:
        """The token's ``ok`` check, or the close that refuses it."""
        try:
            check = await self.gate.check(token)
        except StoreUnavailable:  # a device token cannot be looked up now; it may be fine later
            return _Refusal(CLOSE_TRY_LATER, "store unavailable; reconnect later")
        if check.status == "ok":
            return check
        # The reason tells an app "this device was revoked" from "this token is wrong".
        reason = "revoked" if check.status == "revoked" else "unauthorized"
        return _Refusal(CLOSE_UNAUTHORIZED, reason)


class _Connection:
    def __init__(
        self,
        surface: SocketSurface,
        ws: WebSocket,
        room: ChatRoom,
        subscription: Subscription,
        token: str,
        device: str | None = None,
    ) -> None:
        self.surface = surface
        self.token = token
        # Who an approval answer names: the paired device, or the config token's holder.
        self.device = device or "token"
        self.ws = ws
        self.room = room
        self.subscription = subscription
        self._bad: deque[float] = deque()
        self._budget = FrameBucket(INBOUND_RATE, INBOUND_BURST)
        self._sender: asyncio.Task[None] | None = None
        self._group: asyncio.TaskGroup | None = None  # the connection's tasks

    async def run(self) -> None:
        # The receiver runs in the connection's own task: one task less per idle device. A
        # socket the sender can no longer write to (or closes) also ends the receiver. The
        # sender and the commands being answered belong to the connection's task group: a
        # command still running is answered before the connection's handler returns.
        async with task_group() as group:
            self._group = group
            self._sender = group.create_task(self._send_loop())
            try:
                await self._receive_loop()
            finally:
                await self._stop_sender()

    async def _stop_sender(self) -> None:
        sender, self._sender = self._sender, None
        if sender is not None:
            sender.cancel()
            await asyncio.wait([sender])

    async def revoke(self) -> None:
        """The device's token was revoked: close now, without sending what is queued."""
        await self._stop_sender()
        await _close(self.ws, CLOSE_UNAUTHORIZED, "revoked")

    async def _close(self, code: int, reason: str) -> None:
        """Close from the receiving side; what is already queued goes out first, if it can."""
        await self._stop_sender()
        subscription = self.subscription
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_WAIT):
                while subscription.pending():
                    await self.ws.send_text(await subscription.get_json())
        await _close(self.ws, code, reason)

    async def _send_loop(self) -> None:
        ws, subscription = self.ws, self.subscription
        try:
            while True:
                await ws.send_text(await subscription.get_json())
        except TooSlow:
            metrics.over_bound("closed")
            await _close(ws, CLOSE_TOO_SLOW, TOO_SLOW)
        except StoreUnavailable as exc:  # a catch-up read failed: resume later, with no gap
            position = subscription.position
            await _store_failed(ws, subscription.chat_id, position, exc)
        except (WebSocketDisconnect, RuntimeError, OSError):
            return

    async def _receive_loop(self) -> None:
        max_text = self.surface.settings.max_text
        max_file = self.surface.runtime.config.attachments.max_bytes
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            if not self._budget.take(time.monotonic()):
                if self._budget.over > INBOUND_BURST:
                    await self._close(CLOSE_RATE_LIMITED, "too many frames")
                    return
                if self._budget.over == 1:
                    self._error(
                        "rate_limited",
                        f"more than {INBOUND_RATE:g} frames a second: frames are dropped",
                    )
            else:
                request = inbound.parse(
                    _payload(message), max_text=max_text, max_file_bytes=max_file
                )
                if isinstance(request, inbound.BadFrame):
                    if self._too_many_bad():
                        await self._close(CLOSE_POLICY, "too many bad frames")
                        return
                    self._error(request.code, request.message)
                else:
                    self._handle_safely(request)
            if self.subscription.overflowed:
                # The sender may be stuck on a full socket and never see it: close from here.
                await self._close(CLOSE_TOO_SLOW, TOO_SLOW)
                return

    def _handle_safely(self, request: inbound.Request) -> None:
        """Act on one frame; a fault becomes an ``error`` frame, never a dropped socket."""
        try:
            self._handle(request)
        except StoreUnavailable as exc:
            self._error(exc.code, exc.message)
        except Exception:
            log.exception("iris frame %s on %s failed", type(request).__name__, self.room.chat_id)
            self._error("internal_error", "the server could not handle this frame")

    def _handle(self, request: inbound.Request) -> None:
        match request:
            case inbound.Ping():
                pong: Pong = {"type": "pong"}
                self.subscription.send_local(pong)
            case inbound.SendMessage(text=text, chat_id=chat_id, attachments=files):
                command = parse(text)
                if chat_id is not None and chat_id != self.room.chat_id:
                    self._error("wrong_chat", f"this connection is on chat {self.room.chat_id!r}")
                elif command is not None and command.name == "prompt" and wants_run(command.arg):
                    assert self._group is not None  # frames are handled inside run()
                    self._group.create_task(self._run_prompt(command.arg))
                elif command is not None and command.name == "signin" and command.arg:
                    assert self._group is not None  # frames are handled inside run()
                    self._group.create_task(self._sign_in(command.arg))
                elif command is not None:
                    assert self._group is not None  # frames are handled inside run()
                    self._group.create_task(self._command(command))
                elif self.room.busy:
                    self._error("turn_active", "a turn is running; cancel it or wait for it")
                else:
                    self._start(text, files)
            case inbound.CancelTurn():
                if not self.room.cancel():
                    self._error("no_turn", "no turn is running")
            case inbound.Resume(after_seq=after_seq):
                self.subscription.resume(after_seq)
            case inbound.Hello():
                self._error("unexpected_hello", "already authenticated")
            case inbound.PushSubscribe(subscription=subscription):
                assert self._group is not None  # frames are handled inside run()
                self._group.create_task(self._subscribe(subscription))
            case inbound.ApprovalRespond(approval_id=approval_id, decision=decision):
                assert self._group is not None  # frames are handled inside run()
                self._group.create_task(self._respond(approval_id, decision))
            case inbound.ElicitationRespond(
                elicitation_id=elicitation_id, action=action, content=content
            ):
                assert self._group is not None  # frames are handled inside run()
                self._group.create_task(self._elicitation_answer(elicitation_id, action, content))
            case _:
                assert_never(request)

    async def _elicitation_answer(
        self, elicitation_id: str, action: Action, content: dict[str, Any] | None
    ) -> None:
        """An answer to an MCP server's request for input, asked here or (shared store) by
        another process; a wrong one is told why (an invalid form stays open)."""
        try:
            await self.surface.runtime.elicitations.answer(
                elicitation_id, action, content, chat_id=self.room.session, by=self.device
            )
        except ElicitationError as exc:
            self._error(exc.code, exc.message)

    async def _subscribe(self, subscription: protocol.PushSubscriptionInfo) -> None:
        """Keep this browser's push subscription for the connection's chat."""
        subscriptions = self.surface.runtime.push
        if self.surface.notifier is None or subscriptions is None:
            self._error("push_disabled", "Web Push is off on this server (platforms.iris.push)")
            return
        if not allowed_endpoint(subscription.endpoint):
            self._error("bad_field", "'subscription.endpoint' must be an https URL")
            return
        info = {
            "endpoint": subscription.endpoint,
            "keys": {"p256dh": subscription.keys.p256dh, "auth": subscription.keys.auth},
        }
        try:
            await subscriptions.add(new_subscription(self.room.chat_id, self.device, info))
        except StoreUnavailable as exc:
            self._error(exc.code, exc.message)

    async def _respond(self, approval_id: str, decision: Decision) -> None:
        """An approval answer from this device; a late or unknown one is told why."""
        approvals = self.surface.runtime.approvals
        try:
            result = await approvals.respond(
                approval_id, decision, self.device, chat_id=self.room.session
            )
            if result == "already_decided":
                found = await approvals.resolution(approval_id)
                said = f"{found.decision} by {found.by}" if found is not None else "before"
                self._error("approval_decided", f"already decided: {said}")
            elif result == "unknown":
                self._error("approval_unknown", f"no approval {approval_id!r} waits in this chat")
        except StoreUnavailable as exc:
            self._error(exc.code, exc.message)

    async def _command(self, command: Command) -> None:
        """Answer a chat command to this device alone (a ``command`` frame)."""
        room = self.room
        try:
            target = CommandTarget(
                room.conversation,
                busy=room.busy,  # with a shared store, a read of who holds the turn
                stop=room.cancel,
                show_reasoning=encoder_settings(self.surface.runtime).show_reasoning,
                desk=self.surface.desk(room, self.device),
            )
            answer = await execute(command, target)
        except StoreUnavailable as exc:
            self._error(exc.code, exc.message)
            return
        except Exception:
            log.exception("/%s on %s failed", command.name, room.chat_id)
            self._error("internal_error", f"/{command.name} failed")
            return
        frame: protocol.Command = {"type": "command", "command": command.name, "text": answer}
        self.subscription.send_local(frame)

    async def _run_prompt(self, arg: str) -> None:
        """``/prompt SERVER NAME [k=v]``: the prompt's text goes to the model as this
        device's message (``iris.surfaces.prompts_command``)."""
        run = await fetched(self.surface.runtime.agent, arg)
        if run.problem:
            self._error("prompt_failed", run.problem)
        elif self.room.busy:
            self._error("turn_active", "a turn is running; cancel it or wait for it")
        else:
            self._start(run.text, ())

    async def _sign_in(self, name: str) -> None:
        """``/signin NAME``: the link to open; its redirect comes back to this server at the
        address this device reached it by (``iris.surfaces.signin_command``)."""
        origin = signin_command.origin_of(self.ws.url.scheme, self.ws.url.netloc)
        try:
            text = await signin_command.link(self.surface.runtime.agent, name, origin)
        except SignInFailed as exc:
            self._error("signin_failed", str(exc))
            return
        frame: protocol.Command = {"type": "command", "command": "signin", "text": text}
        self.subscription.send_local(frame)

    def _start(self, text: str, files: Sequence[protocol.SentFile]) -> None:
        settings = self.surface.settings
        turns = self.surface.runtime.turns
        # The token, not the chat id, is the caller: one device could open any number of chats.
        slot = turns.acquire(f"iris:{self.token}", settings.max_turns_per_token)
        if slot is None:
            self._error("busy", "too many turns are running; try again shortly")
            return
        try:
            started = self.room.send(text, origin=self.subscription, slot=slot, files=files)
        except BaseException:  # e.g. StoreUnavailable: no turn holds the slot
            slot.release()
            raise
        if not started:
            slot.release()
            self._error("turn_active", "a turn is running; cancel it or wait for it")

    def _error(self, code: str, message: str) -> None:
        error: Error = {"type": "error", "code": code, "message": message}
        self.subscription.send_local(error)

    def _too_many_bad(self) -> bool:
        now = time.monotonic()
        self._bad.append(now)
        while self._bad and self._bad[0] < now - 60.0:
            self._bad.popleft()
        return len(self._bad) > BAD_FRAMES_PER_MINUTE


async def _pushed(work: Coroutine[Any, Any, int]) -> None:
    await work


def _ready(asked: tuple[str, ...] | None, epoch: str) -> Ready:
    """``ready`` with the chat log's epoch; to a device that named features, the ones it gets
    (doc 05 devices: unchanged)."""
    if asked is None:
        return {"type": "ready", "epoch": epoch}
    return {"type": "ready", "features": [APPEND] if APPEND in asked else [], "epoch": epoch}


def _payload(message: Any) -> str | bytes | None:
    text = message.get("text")
    return text if text is not None else message.get("bytes")


async def _store_failed(ws: WebSocket, chat_id: str, seq: int, exc: StoreUnavailable) -> None:
    """Tell the device the store failed, then close so that it resumes from ``seq`` later."""
    frame: Error = {
        "type": "error",
        "code": exc.code,
        "message": exc.message,
        "chat_id": chat_id,
        "seq": seq,
    }
    log.warning("iris device on %s closed: %s", chat_id, exc.message)
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CLOSE_WAIT):
            await ws.send_text(encode_frame(dict(frame)))
    await _close(ws, CLOSE_TRY_LATER, "store unavailable; reconnect and resume")


async def _close(ws: WebSocket, code: int, reason: str) -> None:
    # A device that stopped reading keeps the socket unwritable; do not wait on it forever.
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CLOSE_WAIT):
            await ws.close(code, reason)

"""One chat on the iris socket: runs its turns, one at a time, and publishes their frames.

A room is shared by every device on the chat. ``send`` echoes the user's message to the other
devices, starts the turn and returns at once; the turn's events go through the frame encoder
into the hub. The surfaces' driver also sends the waiting text when ``edit_interval`` passes with
no new event, so a model that pauses mid-sentence still shows what it has.

``send`` raises ``StoreUnavailable`` if the log cannot take the user's message: no turn starts.
Whatever breaks a turn — the provider, the agent, a frame the log cannot take — the turn ends
for every device the same way: ``error``, ``message.stop`` for text already shown, then
``typing {on:false}``; those closing frames go out live even when the log is down.

The history sent to the model fits its window: when older turns are compacted, devices see a
``commentary`` frame ("earlier conversation summarized") and the session records the cut.
A turn reads the chat's controls (``runtime.controls``: model, reasoning shown) when it starts
and records its usage there when it ends: what the chat's commands set, on any process. The
room's ``conversation`` (``iris.agent.conversation``) does that, saves the user's message as
the turn begins and keeps what the turn leaves.

With a shared store (``owners`` given, see ``iris.state.turn_owners``) the room holds the
chat's turn lease from the user's echo until the turn's last frames are out, and its frames are
fenced by it: a chat whose lease another process holds is busy here too, a cancel is passed to
the owner, and a turn whose lease is lost stops publishing at once (the new owner closes it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence

from iris.agent import Turn
from iris.agent.attachments import File, prepare
from iris.agent.conversation import Conversation, TurnOptions, UserMessage
from iris.errors import StoreUnavailable, user_message
from iris.events import ApprovalRequested, Event, TurnEnded, TurnFailed
from iris.fanout.hub import Hub
from iris.fanout.subscription import Subscription
from iris.protocol import inbound
from iris.protocol.frames import EncoderSettings, FrameEncoder, new_message_id
from iris.protocol.types import Message, SentFile, ServerFrame
from iris.runtime import Runtime
from iris.state.controls import Controls
from iris.state.lease import Lease, LeaseLost
from iris.state.turn_owners import TurnOwners
from iris.surfaces.driver import drive, loop_clock
from iris.surfaces.socket.chats import session_key
from iris.tasks import OpenGroup, logged
from iris.turn_slots import TurnSlot

log = logging.getLogger(__name__)

# The iris cadence when the config sets none for iris (doc 05 §5.1); the chat-platform
# defaults in ``streaming.*`` are paced for rate-limited edit APIs, which a socket is not.
# 48 characters, not 24: each update costs ~114 bytes of framing, so 24-character appends
# put ~5.8x the text on the wire and 48 keeps it under 4x; the apps reveal text at a steady
# pace, so bigger steps do not show (docs/iris-protocol.md, "Bytes per device").
IRIS_EDIT_INTERVAL = 0.8
IRIS_BUFFER_THRESHOLD = 48

# How a turn left open is closed: by a restarted server (its own crash), or, with a shared
# store, by a survivor when the process running it stopped renewing its lease.
INTERRUPTED = ("interrupted", "the server stopped during this turn")
OWNER_LOST = ("owner_lost", "the server running this turn stopped")
# ... or by its own process once the store it lost mid-turn is back (shared store).
STORE_LOST = ("store_unavailable", "the store was lost during this turn")
LOG_LOST = ("store_lost", "the store lost this chat's data during this turn; the reply is cut here")


# Seconds between two looks at a busy chat that a scheduled run waits to start in.
SCHEDULED_WAIT = 0.5


# What a room tells its surface (for Web Push): ("reply" | "scheduled" | "approval", the
# text to show a line of, the message id to open).
Notify = Callable[[str, str, str], None]


@dataclasses.dataclass(frozen=True, slots=True)
class Scheduled:
    """A turn that is a scheduled run: its schedule (on ``message.start``) and its note."""

    schedule_id: str
    note: str = ""  # why it runs late ("was due at 08:00"), said before its reply


def encoder_settings(runtime: Runtime) -> EncoderSettings:
    config = runtime.config
    display = config.display_for("iris")
    override = config.display.platforms.get("iris")
    return EncoderSettings(
        streaming=config.streams("iris"),
        show_reasoning=display.show_reasoning,
        edit_interval=(
            override.edit_interval
            if override is not None and override.edit_interval is not None
            else IRIS_EDIT_INTERVAL
        ),
        buffer_threshold=(
            override.buffer_threshold
            if override is not None and override.buffer_threshold is not None
            else IRIS_BUFFER_THRESHOLD
        ),
    )


class ChatRoom:
    def __init__(
        self,
        runtime: Runtime,
        hub: Hub,
        chat_id: str,
        tasks: OpenGroup,
        owners: TurnOwners | None = None,
    ) -> None:
        self.runtime = runtime
        self.hub = hub
        self.chat_id = chat_id
        self.tasks = tasks  # the surface's: a turn outlives the connection that started it
        self.owners = owners  # None: this process alone runs the chat's turns
        self._lease: Lease | None = None  # the turn lease this room holds (shared store)
        self._keeper: asyncio.Task[None] | None = None  # renews it
        self._lost = False  # the lease was lost: publish nothing more, the new owner closes
        self._unclosed = False  # the log missed a turn's closing frames: the reaper closes it
        self._left_open: tuple[str, str] | None = None  # why, for whoever closes it here
        self.session = session_key(chat_id)
        self.conversation = Conversation(
            runtime.agent,
            runtime.sessions,
            runtime.controls,
            self.session,
            runtime.approvals,
            runtime.elicitations,
        )
        self._task: asyncio.Task[None] | None = None
        self._turn: Turn | None = None
        self._cancel_requested = False
        self._unsent: list[ServerFrame] = []  # frames of a failed publish, for the turn's end
        self._repair: asyncio.Task[None] | None = None  # history repair after a crash
        # The turn's last frames are out: a device may send the next message at once, though
        # the task still keeps the history; the next turn waits for it.
        self._finishing = False
        self._epoch: str | None = None  # the log's epoch when the running turn started
        self.notify: Notify | None = None  # the surface's Web Push, when it has one

    @property
    def running(self) -> bool:
        """A turn of this room's runs here and has not sent its last frames."""
        return self._task is not None and not self._task.done() and not self._finishing

    @property
    def busy(self) -> bool:
        """A turn runs, here or (shared store) in another process; raises ``StoreUnavailable``
        if the store cannot say."""
        return self.running or self._elsewhere() is not None

    @property
    def idle(self) -> bool:
        """Nothing of the chat's is under way here: no turn, no history repair, no lease held,
        nothing left open for a later try. An idle room may be dropped: the next ``hello``
        builds it again from the log (it holds nothing the log does not)."""
        return (
            (self._task is None or self._task.done())
            and (self._repair is None or self._repair.done())
            and self._lease is None
            and not self._unclosed
        )

    def _elsewhere(self) -> str | None:
        """The lease token of another holder of the chat's turn, or None."""
        if self.owners is None:
            return None
        token = self.owners.holder(self.chat_id)
        mine = self._lease.token if self._lease is not None else None
        return None if token is None or token == mine else token

    def send(
        self,
        text: str,
        origin: Subscription | None = None,
        slot: TurnSlot | None = None,
        files: Sequence[SentFile] = (),
        scheduled: Scheduled | None = None,
    ) -> bool:
        """Start a turn for ``text`` (and the ``files`` sent with it); False if one is already
        running. The turn gives ``slot`` (its place under ``server.max_turns``) back when it
        ends. ``scheduled``: the turn is a scheduled run's."""
        if self.busy or not self._claim():
            return False
        echo: Message = {
            "type": "message",
            "message_id": new_message_id(),
            "role": "user",
            "text": _with_names(text, files),
        }
        try:
            self.hub.publish(self.chat_id, echo, exclude=origin)
        except BaseException:
            if not self.running:  # no turn of ours goes on holding the lease
                self._let_go()
            raise
        self._cancel_requested = False
        self._epoch = self.hub.log.epoch(self.chat_id)  # the log the turn writes to
        previous = self._task if self._task is not None and not self._task.done() else None
        self._finishing = False
        received = [
            File(f["kind"], f["name"], f["mime"], inbound.decoded(f)) for f in files
        ]  # checked by inbound.parse: valid base64 within the cap
        self._task = self.tasks.create_task(
            self._run(text, previous, received, scheduled), name=f"iris-turn-{self.chat_id}"
        )
        if slot is not None:
            self._task.add_done_callback(lambda _: slot.release())
        return True

    def _claim(self) -> bool:
        """Hold the chat's turn lease (shared store); False if another process holds it."""
        if self.owners is None or (self._lease is not None and not self._lost):
            return True  # alone, or the turn finishing here still holds it: the next keeps it
        lease = self.owners.claim(self.chat_id)
        if lease is None:
            return False
        self._lease, self._lost = lease, False
        self.hub.fence(self.chat_id, lease.key, lease.token)
        self._keeper = self.tasks.create_task(
            logged(lease.keep(lambda: self._on_lost(lease)), f"turn lease of {self.chat_id}"),
            name=f"iris-lease-{self.chat_id}",
        )
        return True

    def _on_lost(self, lease: Lease) -> None:
        """The lease ran out or was taken over: the turn stops, publishing nothing more."""
        if lease is not self._lease:  # released already (its keeper ignored a cancel)
            return
        log.warning("iris turn in %s lost its lease: it stops here", self.chat_id)
        self._lost = True
        self._cancel_requested = True
        if self._turn is not None:
            self._turn.interrupt()

    def _let_go(self) -> None:
        """Release the lease after the turn's last frames (never raises: it expires anyway).

        A turn the log may still show open (its lease was lost, or its closing frames did not
        reach the log) stays in the registry of running turns: a reaper closes it."""
        lease, self._lease = self._lease, None
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
        done, self._unclosed = not (self._lost or self._unclosed), False
        if lease is None or self.owners is None:
            return
        self.hub.unfence(self.chat_id)
        try:
            self.owners.release(self.chat_id, lease, done=done)
        except StoreUnavailable as exc:
            log.warning("turn lease of %s left to expire: %s", self.chat_id, exc.message)

    def recover(self, reason: tuple[str, str] = INTERRUPTED) -> None:
        """End a turn the log shows open: the server running it stopped without finishing it
        (a crash; with a shared store, an owner whose lease ran out). ``reason`` is the
        ``error`` frame's code and message.

        Without this, every device that resumes would show the typing indicator forever. The
        text devices saw also goes into the model's history, as an interrupted reply, so the
        model knows what the user read. With a shared store the room takes the turn lease
        first: a turn a live process runs is left alone, and of several survivors exactly one
        closes it. Raises ``StoreUnavailable`` if the log cannot be read or written."""
        log = self.hub.log
        if self.busy or not log.turn_open(self.chat_id) or not self._claim():
            return
        try:
            # Read again, holding the lease: another survivor may have closed it meanwhile.
            if self.owners is None or log.turn_open(self.chat_id):
                self._close_open(self._left_open or reason)
            self._left_open = None
        except BaseException:
            self._unclosed = True  # still open: it stays in the registry, for another try
            raise
        finally:
            if not self.running:
                self._let_go()

    def _close_open(self, reason: tuple[str, str]) -> None:
        log = self.hub.log
        open_messages = log.open_messages(self.chat_id)
        conversation = log.messages(self.chat_id)
        user = next((m["text"] for m in reversed(conversation) if m["role"] == "user"), None)
        shown = "\n\n".join(text for text in open_messages.values() if text)
        repair = logged(self.conversation.repair(user, shown), f"history repair of {self.chat_id}")
        self._repair = self.tasks.create_task(repair)
        frames: list[ServerFrame] = [
            {"type": "message.stop", "message_id": message_id, "final_text": text}
            for message_id, text in open_messages.items()
        ]
        code, message = reason
        frames.append({"type": "error", "code": code, "message": message})
        frames.append({"type": "typing", "on": False})
        self.hub.publish_all(self.chat_id, frames)

    def cancel(self) -> bool:
        """Interrupt the running turn, here or (shared store) through its owner's inbox;
        False if there is none."""
        if not self.running:
            token = self._elsewhere()
            if token is None or self.owners is None:
                return False
            self.owners.ask_cancel(self.chat_id, token)  # its closing frames come by the log
            return True
        self._cancel_requested = True
        if self._turn is not None:
            self._turn.interrupt()
        return True

    @property
    def canceled(self) -> bool:
        """The running (or last) turn was asked to stop by a cancel, here or from another
        process (not by losing its lease)."""
        return self._cancel_requested and not self._lost

    def cancel_held(self, token: str) -> None:
        """Another process asked to cancel the turn holding ``token``: if it still runs here."""
        if self._lease is not None and self._lease.token == token and self.running:
            self.cancel()

    async def close(self) -> None:
        task = self._task
        if task is None or task.done():
            return
        if self.running:
            self.cancel()  # the turn ends as interrupted, its text so far kept and shown
        _, late = await asyncio.wait([task], timeout=3.0)
        for stuck in late:
            stuck.cancel()
        await asyncio.wait([task])

    async def run_scheduled(self, text: str, scheduled: Scheduled) -> bool:
        """A scheduled run's turn, once the chat is free; whether its frames all went out."""
        while True:  # a turn slot (server.max_turns), then the chat free of a person's turn
            slot = self.runtime.turns.acquire()
            if slot is not None:
                if self.send(text, slot=slot, scheduled=scheduled):
                    break
                slot.release()
            await asyncio.sleep(SCHEDULED_WAIT)
        task = self._task
        assert task is not None
        await asyncio.wait([task])
        return not (self._lost or self._unclosed)

    async def _run(
        self,
        text: str,
        previous: asyncio.Task[None] | None = None,
        files: Sequence[File] = (),
        scheduled: Scheduled | None = None,
    ) -> None:
        if previous is not None:  # its history must be whole before this turn reads it
            await asyncio.wait([previous])
        settings = encoder_settings(self.runtime)
        encoder = FrameEncoder(settings)
        try:
            controls = await self.conversation.controls()
            shown = controls.reasoning(settings.show_reasoning)
            encoder = FrameEncoder(
                dataclasses.replace(settings, show_reasoning=shown),
                schedule_id=scheduled.schedule_id if scheduled else "",
            )
            if scheduled is not None and scheduled.note:
                self._publish([_commentary(f"⏰ {scheduled.note}")])
            await self._stream(text, encoder, controls, files)
        except Exception as exc:  # a broken turn must still end with error + typing off
            if isinstance(exc, StoreUnavailable):
                log.warning("iris turn in %s stopped: %s", self.chat_id, exc.message)
            else:
                log.exception("iris turn in %s crashed", self.chat_id)
            code, message, _ = user_message(exc)
            self._end(encoder.fail(code, message))
        finally:
            self._turn = None
            # Also on cancellation (server shutdown): every turn ends with typing off.
            self._end(encoder.fail("cancelled", "the turn was cancelled"))
            if self._task is asyncio.current_task():  # no later turn took the lease over
                self._let_go()

    async def _stream(
        self, text: str, encoder: FrameEncoder, controls: Controls, files: Sequence[File] = ()
    ) -> None:
        """Run the agent turn, publishing its frames and keeping its history."""
        self._publish(encoder.begin())
        user = UserMessage(text, await prepare(self.runtime.config, text, files) if files else None)
        if user.notes:  # what the model did not get of the files, said to every device
            self._publish([_commentary("\n".join(user.notes))])
        if self._repair is not None:
            # The history a crash left must be whole before it is read.
            repair, self._repair = self._repair, None
            await repair
        options = TurnOptions(
            stream=encoder.settings.streaming,
            show_compaction=True,
            metadata={"surface": "iris", "chat_id": self.chat_id},
        )
        exchange = await self.conversation.begin(user, options, controls)
        async with exchange.turn as turn:
            self._turn = turn
            if self._cancel_requested:
                turn.interrupt()

            async def keep(end: TurnEnded | TurnFailed) -> None:
                # Kept before the turn's last frames go out: a device may act on them (the
                # next message, /new) at once. A turn that lost its lease keeps nothing: the
                # new owner repairs the history with the text devices saw.
                if self._still_owner() and not await exchange.keep(end):
                    assert exchange.unkept is not None
                    raise exchange.unkept  # the turn ends with the store's failure
                self._finishing = True

            publishing = _Publishing(encoder, self._publish, keep, self._done, self.notify)
            await drive(turn, publishing)
        if self.notify is not None and publishing.reply is not None:
            kind = "scheduled" if encoder.schedule_id else "reply"
            self.notify(kind, publishing.reply[1], publishing.reply[0])

    def _still_owner(self) -> bool:
        """Whether this room may still act for the chat's turn (asked of the store, with a
        shared one: the history must not keep a reply the fence will refuse to show)."""
        if self._lost:
            return False
        if self.owners is None or self._lease is None:
            return True
        if self.owners.holder(self.chat_id) != self._lease.token:
            self._on_lost(self._lease)
        return not self._lost

    def _done(self) -> None:
        """The turn's last frames are out: its lease goes at once (in this same step), so the
        next message may start a turn on any process, as it may here."""
        if self._task is asyncio.current_task():  # no later turn took the lease over
            self._let_go()

    def _publish(self, frames: list[ServerFrame]) -> None:
        if self._lost:  # the hub's fence would refuse them too; no need to ask
            raise LeaseLost(f"the turn lease of {self.chat_id} was lost")
        for n, frame in enumerate(frames):
            try:
                self.hub.publish(self.chat_id, frame)
            except Exception as exc:
                if isinstance(exc, LeaseLost):  # the fence refused it (a tick, maybe): stop
                    self._lost = True
                    if self._turn is not None:
                        self._turn.interrupt()
                # The encoder counts these as sent (a typing-off among them, maybe): the turn's
                # end sends them before its own closing frames.
                self._unsent = frames[n:]
                raise

    def _log_lost(self) -> bool:
        """Did the chat's log restart (a new epoch) since this turn began?"""
        try:
            return self._epoch is not None and self.hub.log.epoch(self.chat_id) != self._epoch
        except StoreUnavailable:
            return False  # still unreachable: not known to be lost

    def _end(self, frames: list[ServerFrame]) -> None:
        """Publish a turn's closing frames: live even if the log cannot keep them; never raises.
        A turn that lost its lease publishes none: the new owner closes it in the log."""
        frames, self._unsent = [*self._unsent, *frames], []
        if frames:
            self._finishing = True
        if self._lost and not self._log_lost():
            return
        if self._lost:
            # The store lost its data under this turn (its lease, the registry of running
            # turns and the log went with it): nobody else will close it, so this process does,
            # in the new log, and says why (finding 2 of the second hardening pass).
            self._lost = False
            self.hub.unfence(self.chat_id)
            frames = _with_error(frames, LOG_LOST)
        try:
            self.hub.publish_all(self.chat_id, frames)
        except LeaseLost:  # another process owns the chat now: it closes the turn
            self._lost = True
        except StoreUnavailable as exc:  # the log missed them (a shared log: devices too)
            self._unclosed = True
            self._left_open = STORE_LOST
            log.warning("iris turn in %s closed without the log: %s", self.chat_id, exc.message)
        except Exception:  # the hub itself broke: nothing more a device can be told
            self._unclosed = True
            log.exception("iris turn in %s could not be closed", self.chat_id)


def _commentary(text: str) -> ServerFrame:
    return {"type": "commentary", "message_id": new_message_id(), "text": text}


def _with_error(frames: list[ServerFrame], reason: tuple[str, str]) -> list[ServerFrame]:
    """``frames`` with an ``error`` frame for ``reason`` before the closing typing-off."""
    code, message = reason
    error: ServerFrame = {"type": "error", "code": code, "message": message}
    if frames and frames[-1]["type"] == "typing":
        return [*frames[:-1], error, frames[-1]]
    return [*frames, error, {"type": "typing", "on": False}]


class _Publishing:
    """A turn's frames into the hub, as the driver's planner: each event's frames at once, and
    the waiting text when ``edit_interval`` passes with no new event."""

    settled = True  # the last event's frames go out when it is fed

    def __init__(
        self,
        encoder: FrameEncoder,
        publish: Callable[[list[ServerFrame]], None],
        keep: Callable[[TurnEnded | TurnFailed], Awaitable[None]],
        done: Callable[[], None],
        notify: Notify | None = None,
    ) -> None:
        self.encoder, self.publish, self.keep, self.done = encoder, publish, keep, done
        self.notify = notify
        self.stalled = False  # the log refused a tick: the next event's frames end the turn
        self.reply: tuple[str, str] | None = None  # (message id, text) of the last reply

    async def feed(self, event: Event) -> bool:
        last = isinstance(event, TurnEnded | TurnFailed)
        if last:
            await self.keep(event)
        if isinstance(event, ApprovalRequested) and self.notify is not None:
            self.notify("approval", f"{event.name} waits for your approval", "")
        frames = self.encoder.feed(event, loop_clock())
        self.publish(frames)
        for frame in frames:
            if frame["type"] == "message.stop" and frame.get("final_text"):
                self.reply = (frame["message_id"], str(frame.get("final_text")))
            elif frame["type"] == "message" and frame.get("role") == "assistant":
                self.reply = (frame["message_id"], frame["text"])
        if last:
            self.done()
        return last

    async def act(self, now: float) -> bool:
        deadline = self.due(now)
        if deadline is None or now < deadline:
            return False
        try:
            self.publish(self.encoder.tick(now))
        except StoreUnavailable:
            self.stalled = True  # the turn's next frame meets the same failure and ends the turn
        return True

    def due(self, now: float) -> float | None:
        return None if self.stalled else self.encoder.deadline()


def _with_names(text: str, files: Sequence[SentFile]) -> str:
    """The echo of a message to the chat's other devices: its text, and the files' names."""
    if not files:
        return text
    names = ", ".join(f["name"] or "(unnamed)" for f in files)
    return f"{text}\n[attached: {names}]" if text.strip() else f"[attached: {names}]"

"""The fan-out hub: numbers each chat's frames, logs them, and hands them to every device.

``publish`` is synchronous and never waits on a subscriber: it assigns the chat's next ``seq``,
appends the frame to the log and pushes it into each subscription's bounded queue. Because
nothing awaits between those steps, a subscription that reads the log and goes live in one step
(see ``Subscription.resume``) sees every frame exactly once.

The log queues its writes for the store's thread (``SqliteFrameLog.append``): a locked store delays
the log's copy of a frame, never a device's; the only store read here (a chat's latest seq,
once per chat) raises ``StoreUnavailable`` when it fails.

The hub does not look inside a frame: what may be skipped or dropped is the protocol's to say
(``iris.fanout.rules``), read by the subscriptions and the log.

The log is the strategy that numbers frames (``ChatLog.sequence``). The SQLite ``SqliteFrameLog`` is
this process's alone: the hub counts each chat's seqs itself. A ``shared`` log
(``RedisFrameLog``) is appended by every process: it gives out the seq, and returns the frames
other processes appended since this one last delivered, which ``publish`` hands out first; a
tailer (``iris.fanout.tailer``) ``deliver``s the rest. Either way each device gets a chat's
frames in seq order, once. The hub tracks a shared chat's position only while a device here
follows it (``followed``), and tells the tailer when a chat gains its first (``on_follow``).
``fence``/``unfence`` make a shared log refuse a chat's appends once the turn's lease is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from iris.errors import StoreUnavailable
from iris.fanout.rules import Body, DeviceWriter, Frame, FrameRules
from iris.fanout.subscription import Subscription, encode_frame
from iris.observability import metrics


class LogRestarted(StoreUnavailable):
    """The chat's seqs restarted under this process (the shared store lost its data): nothing
    was appended. ``epoch`` is the log's new one; the hub resets the chat's devices here and
    appends again (``Hub.publish``)."""

    def __init__(self, chat_id: str, epoch: str) -> None:
        super().__init__(f"chat {chat_id}: the frame log was lost and restarted")
        self.epoch = epoch


class ChatLog(Protocol):
    """What the hub and the subscriptions need of a frame log (SQLite's or Redis's)."""

    rules: FrameRules

    @property
    def shared(self) -> bool:
        """Do other processes append to the same chats?"""
        ...

    def sequence(
        self, chat_id: str, body: Body, delivered: int | None
    ) -> list[tuple[Frame, str | None]]:
        """Number and log one frame; the frames to deliver, in order, the new one last (with
        their JSON, or None: a snapshot is not encoded whole unless a device sends it so)."""
        ...

    def fence(self, chat_id: str, key: str, token: str) -> None: ...

    def unfence(self, chat_id: str) -> None: ...

    def prune(self, chat_id: str) -> None: ...

    def floor(self, chat_id: str) -> int: ...

    def last_seq(self, chat_id: str) -> int: ...

    def after(self, chat_id: str, seq: int, limit: int) -> list[Frame]: ...

    def messages(self, chat_id: str) -> list[dict[str, Any]]: ...

    def open_messages(self, chat_id: str) -> dict[str, str]: ...

    def turn_open(self, chat_id: str) -> bool: ...

    async def open_turns(self) -> list[str]: ...

    async def prune_idle(self) -> int: ...

    def epoch(self, chat_id: str) -> str:
        """The chat log's epoch: it changes whenever the chat's seqs restart."""
        ...


class Hub:
    def __init__(self, log: ChatLog, *, queue_size: int = 256) -> None:
        self.log = log
        self.queue_size = queue_size
        # chat_id -> the last seq delivered here (for a shared log: chats followed here only).
        self._latest: dict[str, int] = {}
        self._subscribers: dict[str, set[Subscription]] = {}
        self.on_follow: Callable[[str], None] | None = None  # a chat got its first device here
        # The chat's approval requests still open, as frames: a ``sync`` carries them (their
        # request frames may be past the log's reach). Set by the surface that owns the broker.
        self.open_approvals: Callable[[str], list[Frame]] = lambda chat_id: []

    def latest(self, chat_id: str) -> int:
        """The chat's last seq delivered here (read from the log the first time)."""
        known = self._latest.get(chat_id)
        if known is None:
            known = self.log.last_seq(chat_id)
            if chat_id in self._subscribers or not self.log.shared:
                # A shared chat nobody here follows moves on without us: not kept.
                self._latest[chat_id] = known
        return known

    def publish(self, chat_id: str, body: Body, *, exclude: Subscription | None = None) -> Frame:
        """Sequence, log and deliver one chat-scoped frame; ``exclude`` skips one device live."""
        known = self._latest.get(chat_id) if self.log.shared else self.latest(chat_id)
        try:
            frames = self.log.sequence(chat_id, body, known)
        except LogRestarted:
            # The store lost the chat's log (its seqs begin again): the devices here get the
            # new log's view and follow it from seq 0; then this frame goes into it.
            self.restart(chat_id)
            frames = self.log.sequence(chat_id, body, 0)
        metrics.frame_appended("redis" if self.log.shared else "sqlite")
        for frame, text in frames[:-1]:  # appended by other processes first
            self.deliver(chat_id, frame, text)
        frame, text = frames[-1]
        self.deliver(chat_id, frame, text, exclude=exclude)
        return frame

    def deliver(
        self,
        chat_id: str,
        frame: Frame,
        text: str | None = None,
        *,
        exclude: Subscription | None = None,
    ) -> None:
        """Hand a logged frame to this process's devices on the chat: in seq order, once."""
        seq = frame["seq"]
        subscribers = self._subscribers.get(chat_id)
        if subscribers is None and self.log.shared:
            return  # nobody here follows the chat: nothing to hand out or to track
        if seq <= self._latest.get(chat_id, 0):
            return  # delivered already (by ``publish`` or the tailer)
        self._latest[chat_id] = seq
        if not subscribers:
            return
        if text is None and not self.log.rules.traits(frame["type"]).snapshot:
            # Once, not once per device. Not a snapshot: most devices (the append feature)
            # send what it added, and encoding each whole one would cost O(N) per update.
            text = encode_frame(frame)
        for subscription in subscribers:
            if subscription is not exclude:
                subscription.push(frame, text)

    def publish_all(self, chat_id: str, bodies: Iterable[Body]) -> None:
        for body in bodies:
            self.publish(chat_id, body)

    def fence(self, chat_id: str, key: str, token: str) -> None:
        """Append to the chat only while the lease ``key`` holds ``token`` (a shared log; the
        SQLite log has one writer and ignores it). A refused append raises ``LeaseLost``."""
        self.log.fence(chat_id, key, token)

    def unfence(self, chat_id: str) -> None:
        self.log.unfence(chat_id)

    def followed(self) -> dict[str, int]:
        """Chats a device here follows, with the last seq delivered here."""
        return {chat_id: self.latest(chat_id) for chat_id in self._subscribers}

    def subscribe(self, chat_id: str, *, writer: DeviceWriter | None = None) -> Subscription:
        """A live subscription from the chat's latest seq; ``resume`` it to replay.

        ``writer`` rewrites the device's frames as they are sent (e.g. ``iris.protocol.appends``)."""
        position = self.latest(chat_id)
        subscription = Subscription(self, chat_id, self.queue_size, position, writer=writer)
        first = chat_id not in self._subscribers
        self._latest[chat_id] = position  # followed from here on
        self._subscribers.setdefault(chat_id, set()).add(subscription)
        if first and self.on_follow is not None:
            self.on_follow(chat_id)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        subscribers = self._subscribers.get(subscription.chat_id)
        if subscribers is not None:
            subscribers.discard(subscription)
            if not subscribers:
                del self._subscribers[subscription.chat_id]
                if self.log.shared:  # no longer followed: its position goes stale from now
                    self._latest.pop(subscription.chat_id, None)

    def restart(self, chat_id: str) -> None:
        """The chat's log restarted: every device here resyncs to it, from seq 0."""
        if chat_id in self._subscribers or not self.log.shared:
            self._latest[chat_id] = 0
        for subscription in self.subscriptions(chat_id):
            subscription.restart()

    def forget(self, chat_id: str) -> None:
        """Drop what the hub keeps of a chat no device here follows (its position is read
        from the log again when it is next used)."""
        if chat_id not in self._subscribers:
            self._latest.pop(chat_id, None)

    def subscriptions(self, chat_id: str) -> list[Subscription]:
        return list(self._subscribers.get(chat_id, ()))

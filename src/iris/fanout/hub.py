"""The fan-out hub: numbers each chat's frames, logs them, and hands them to every device.

``publish`` is synchronous and never waits on a subscriber: it assigns the chat's next ``seq``,
appends the frame to the log and pushes it into each subscription's bounded queue. Because
nothing awaits between those steps, a subscription that reads the log and goes live in one step
(see ``Subscription.resume``) sees every frame exactly once.

The log queues its writes for the store's thread (``FrameLog.append``): a locked store delays
the log's copy of a frame, never a device's; the only store read here (a chat's latest seq,
once per chat) raises ``StoreUnavailable`` when it fails.

The hub does not look inside a frame: what may be skipped or dropped is the protocol's to say
(``iris.fanout.rules``), read by the subscriptions and the log.
"""

from __future__ import annotations

from collections.abc import Iterable

from iris.fanout.framelog import FrameLog
from iris.fanout.rules import Body, DeviceWriter, Frame
from iris.fanout.subscription import Subscription, encode_frame


class Hub:
    def __init__(self, log: FrameLog, *, queue_size: int = 256) -> None:
        self.log = log
        self.queue_size = queue_size
        self._latest: dict[str, int] = {}
        self._subscribers: dict[str, set[Subscription]] = {}

    def latest(self, chat_id: str) -> int:
        if chat_id not in self._latest:
            self._latest[chat_id] = self.log.last_seq(chat_id)
        return self._latest[chat_id]

    def publish(self, chat_id: str, body: Body, *, exclude: Subscription | None = None) -> Frame:
        """Sequence, log and deliver one chat-scoped frame; ``exclude`` skips one device live."""
        seq = self.latest(chat_id) + 1
        self._latest[chat_id] = seq
        frame = {**body, "chat_id": chat_id, "seq": seq}
        text = encode_frame(frame)  # once, not once per device
        self.log.append(frame, text)
        for subscription in self._subscribers.get(chat_id, ()):
            if subscription is not exclude:
                subscription.push(frame, text)
        return frame

    def publish_all(self, chat_id: str, bodies: Iterable[Body]) -> None:
        for body in bodies:
            self.publish(chat_id, body)

    # STUB until the redislog branch is merged (its Hub fences a chat's appends by a lease).
    def fence(self, chat_id: str, key: str, token: str) -> None:
        """Refuse the chat's appends unless the lease ``key`` holds ``token`` (Redis only)."""

    def unfence(self, chat_id: str) -> None:
        """Stop fencing the chat's appends."""

    def subscribe(self, chat_id: str, *, writer: DeviceWriter | None = None) -> Subscription:
        """A live subscription from the chat's latest seq; ``resume`` it to replay.

        ``writer`` rewrites the device's frames as they are sent (e.g. ``iris.appends``)."""
        subscription = Subscription(
            self, chat_id, self.queue_size, self.latest(chat_id), writer=writer
        )
        self._subscribers.setdefault(chat_id, set()).add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        subscribers = self._subscribers.get(subscription.chat_id)
        if subscribers is not None:
            subscribers.discard(subscription)
            if not subscribers:
                del self._subscribers[subscription.chat_id]

    def subscriptions(self, chat_id: str) -> list[Subscription]:
        return list(self._subscribers.get(chat_id, ()))

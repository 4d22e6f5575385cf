"""One device's place in one chat: a bounded queue in front of its socket, and catch-up.

The hub ``push``es every chat frame without waiting. The device's sender ``await``s ``get()``.
A device that falls behind never slows anyone else:

1. a frame the protocol marks ``snapshot`` (see ``iris.fanout.rules``) that a later queued frame
   of the same message supersedes is skipped when its turn to be sent comes (newest wins: each
   is a full snapshot, so nothing is lost), and dropped at once when the queue passes its
   capacity;
2. if it is still over capacity, the queue gives up its chat frames and the device reads them
   back from the frame log in pages (``catch-up``), as a resume does — no other frame is ever
   dropped, only re-read.

A device may have a ``DeviceWriter`` (the iris ``append`` feature's ``AppendWriter``) that
rewrites its frames as they leave the queue, against what this device was last sent: the queue
and the log keep snapshots, so the snapshots skipped above merge into one append, and a
catch-up needs nothing special. A ``resume`` makes the writer start over.

``position`` is the seq of the last chat frame put in line for the device. Connection-scoped
frames (``send_local``: ready, pong, errors, sync) are stamped with it, so whatever seq a device
has seen last is a valid point to resume from.

The bound holds for connection-scoped frames too: of a type marked ``one_pending`` one waits at
most (the protocol says whether the waiting one or the new one stays), and a device whose own
frames alone overrun the bound (it keeps asking and never reads the answers) is
``overflowed``: its queue is emptied, ``get`` raises ``TooSlow`` and the connection closes.
Nothing it missed is lost: chat frames are in the log, so it resumes from the last seq it saw.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from iris.fanout.rules import Body, DeviceWriter, Frame, FrameRules
from iris.formats.surrogates import clean
from iris.observability import metrics

if TYPE_CHECKING:
    from iris.fanout.hub import Hub


class TooSlow(Exception):
    """The device stayed over its queue bound; its connection closes (it can resume)."""


@dataclass(slots=True)
class _Item:
    frame: Frame
    chat: bool  # a chat-scoped frame (has its own seq) or a connection-scoped one
    text: str | None = None  # the frame as JSON, when the hub serialised it once for everyone

    def json(self) -> str:
        return self.text if self.text is not None else encode_frame(self.frame)


def encode_frame(frame: Frame) -> str:
    """The frame as JSON text that is always valid UTF-8.

    A lone surrogate (from a ``\\ud800`` escape a model or a client sent) cannot be encoded to
    UTF-8, so a socket would fail on it mid-turn; it becomes U+FFFD here, once, for every
    device and for the log."""
    text = json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
    return text if text.isascii() else clean(text)


class Subscription:
    def __init__(
        self,
        hub: Hub,
        chat_id: str,
        capacity: int,
        position: int,
        *,
        writer: DeviceWriter | None = None,
    ) -> None:
        self.chat_id = chat_id
        self.capacity = capacity
        self.position = position
        self.skipped = 0  # superseded updates this device never got
        self.catchups = 0  # times the queue overflowed and the device re-read the log
        self.overflowed = False  # over the bound with its own frames: the connection closes
        self.high_water = 0  # the longest the queue has been (a test and bench figure)
        self._hub = hub
        self._rules = hub.log.rules
        self._queue: deque[_Item] = deque()
        self._newest: dict[str, int] = {}  # message_id -> seq of its newest queued frame
        self._catching_up = False
        self._wake = asyncio.Event()
        # Rewrites frames at send time, against what this device was sent (so skipped
        # snapshots merge into one append, and a catch-up or a resume stays right). None: the
        # frames go out exactly as the hub made them.
        self._writer = writer

    # -- the hub's side ------------------------------------------------------------------------
    def push(self, frame: Frame, text: str | None = None) -> None:
        """A new chat frame (and its JSON, if already made); never waits."""
        if self._catching_up or self.overflowed:
            return  # the log has it; the catch-up (or the resume after a close) reads it
        if frame["seq"] <= self.position:
            return  # a catch-up page already had it (a shared log can run ahead of the hub)
        self._enqueue(frame, text)
        self._bound()

    # -- the connection's side -----------------------------------------------------------------
    def send_local(self, body: Body) -> None:
        """A connection-scoped frame, in line behind the chat frames already queued.

        Of a type marked ``one_pending``, the one already waiting answers this one too
        (``first``), or this one replaces it (``last``)."""
        if self.overflowed:
            return
        kind = body["type"]
        one = self._rules.traits(kind).one_pending
        if one is not None:
            waiting = [item for item in self._queue if not item.chat and item.frame["type"] == kind]
            if waiting and one == "first":
                return
            for item in waiting:
                self._queue.remove(item)
        frame = {**body, "chat_id": self.chat_id, "seq": self.position}
        self._queue.append(_Item(frame, False))
        self._bound()

    def resume(self, after_seq: int) -> None:
        """Replay every chat frame after ``after_seq``, then continue live: no gap, no duplicate.

        Raises ``StoreUnavailable`` (and changes nothing) if the log cannot be read."""
        if self.overflowed:
            return
        # The bounds hold for what a resume can reach (a store that takes no writes skips
        # this pass: ``SqliteFrameLog.prune`` logs it and the replay goes on).
        self._hub.log.prune(self.chat_id)
        latest = self._hub.latest(self.chat_id)
        if after_seq > latest:  # it may have seen what this process has yet to deliver (a
            latest = max(latest, self._hub.log.last_seq(self.chat_id))  # shared log)
        past_reach = after_seq > latest or after_seq < self._hub.log.floor(self.chat_id)
        messages = self._hub.log.messages(self.chat_id) if past_reach else []
        self._drop_chat_frames()
        if self._writer is not None:
            self._writer.forget()  # the replay (or sync) brings each open message whole
        if after_seq == latest:
            metrics.resumed("live")
            self._go_live(latest)
        elif past_reach:
            # The device knows a future we do not (a reset server) or the log no longer reaches.
            metrics.resumed("sync")
            self._sync(latest, messages)
        else:
            metrics.resumed("replay")
            self.position = after_seq
            self._catching_up = True
        self._restamp()
        self._wake.set()

    async def get(self) -> Frame:
        return (await self._next()).frame

    async def get_json(self) -> str:
        """The next frame as the JSON text to send (counted as sent: the socket's sender)."""
        item = await self._next()
        text = item.json()
        metrics.frame_sent(item.frame["type"], text)
        return text

    async def _next(self) -> _Item:
        while True:
            if self.overflowed:
                raise TooSlow(f"more than {self.capacity} frames waiting")
            if self._queue:
                item = self._queue.popleft()
                if self._superseded(item):
                    # Newest wins: a device that fell even slightly behind gets the latest
                    # snapshot now instead of every stale one first.
                    self.skipped += 1
                    continue
                return item if self._writer is None else self._as_sent(item, self._writer)
            if self._catching_up:
                self._read_page()
                continue
            self._wake.clear()
            await self._wake.wait()

    def pending(self) -> int:
        return len(self._queue)

    @property
    def idle(self) -> bool:
        """Would ``get`` wait? (Nothing queued and nothing left to read back from the log.)"""
        return not self._queue and not self._catching_up

    # -- internals -----------------------------------------------------------------------------
    def _read_page(self) -> None:
        chat, log = self.chat_id, self._hub.log
        latest = self._hub.latest(chat)
        if self.position < log.floor(chat):
            # The bounds moved past us while we were catching up.
            self._sync(latest, log.messages(chat))
            return
        page = log.after(chat, self.position, self.capacity)
        if not page:
            self._go_live(latest)
            return
        for frame in coalesce(page, self._rules):
            self._enqueue(frame)
        self.position = page[-1]["seq"]
        if self.position >= latest:
            # Read and switch in one step: no frame can be published in between. (A shared
            # log may hold frames this process has not delivered yet: the page had them, so
            # live starts after them.)
            self._go_live(self.position)

    def _as_sent(self, item: _Item, writer: DeviceWriter) -> _Item:
        rewritten = writer.convert(item.frame)
        return item if rewritten is None else _Item(rewritten, item.chat)

    def _enqueue(self, frame: Frame, text: str | None = None) -> None:
        self._queue.append(_Item(frame, True, text))
        self.position = frame["seq"]
        message_id = frame.get("message_id")
        if isinstance(message_id, str):
            self._newest[message_id] = frame["seq"]

    def _superseded(self, item: _Item) -> bool:
        frame = item.frame
        message_id = frame.get("message_id")
        if not item.chat or not isinstance(message_id, str):
            return False
        if self._newest.get(message_id, 0) <= frame["seq"]:
            self._newest.pop(message_id, None)  # nothing newer queued: keep the map small
            return False
        return self._rules.traits(frame["type"]).snapshot

    def _sync(self, latest: int, messages: list[dict[str, Any]]) -> None:
        self.position = latest
        epoch = self._hub.log.epoch(self.chat_id)
        approvals = self._hub.open_approvals(self.chat_id)
        self.send_local(self._rules.sync(messages, epoch, approvals))
        self._go_live(latest)

    def restart(self) -> None:
        """The chat's log restarted (its seqs begin again at 1): the device's view is replaced
        by the new log's conversation, of the new epoch, and it follows from seq 0."""
        if self.overflowed:
            return
        self._drop_chat_frames()
        self._catching_up = False
        if self._writer is not None:
            self._writer.forget()
        self._sync(0, self._hub.log.messages(self.chat_id))
        self._restamp()
        self._wake.set()

    def _go_live(self, latest: int) -> None:
        self.position = latest
        self._catching_up = False

    def _bound(self) -> None:
        """Bring the queue back within its capacity, then wake the sender."""
        if len(self._queue) > self.capacity:
            self._relieve()
        if len(self._queue) > self.capacity:
            # Only the device's own answers are left and still too many: nothing more can be
            # dropped without losing something it asked for, so it goes (and resumes).
            self.overflowed = True
            self._queue.clear()
            self._newest.clear()
            self._catching_up = False
        self.high_water = max(self.high_water, len(self._queue))
        self._wake.set()

    def _relieve(self) -> None:
        before = len(self._queue)
        kept = coalesce_items(self._queue, self._rules)
        self.skipped += before - len(kept)
        self._queue = deque(kept)
        if len(self._queue) <= self.capacity:
            return
        # Still too far behind: forget the queued chat frames and re-read them from the log.
        self.catchups += 1
        metrics.over_bound("catchup")
        self._drop_chat_frames()
        self._catching_up = True
        self._restamp()

    def _drop_chat_frames(self) -> None:
        """Forget queued chat frames; ``position`` falls back to what the device already got."""
        chat_frames = [item for item in self._queue if item.chat]
        if chat_frames:
            self.position = chat_frames[0].frame["seq"] - 1
        self._queue = deque(item for item in self._queue if not item.chat)
        self._newest.clear()

    def _restamp(self) -> None:
        for item in self._queue:
            if not item.chat:
                item.frame["seq"] = min(item.frame["seq"], self.position)


def coalesce(frames: Iterable[Frame], rules: FrameRules) -> list[Frame]:
    """Drop each ``snapshot`` frame that a later frame of the same message supersedes."""
    return [item.frame for item in coalesce_items((_Item(f, True) for f in frames), rules)]


def coalesce_items(items: Iterable[_Item], rules: FrameRules) -> list[_Item]:
    kept: list[_Item] = []
    later: set[str] = set()
    for item in reversed(list(items)):
        message_id = item.frame.get("message_id")
        if item.chat and isinstance(message_id, str):
            if message_id in later and rules.traits(item.frame["type"]).snapshot:
                continue
            later.add(message_id)
        kept.append(item)
    kept.reverse()
    return kept

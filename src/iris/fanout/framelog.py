"""The per-chat frame log in SQLite: what a reconnecting device replays, and the transcript.

``append`` never waits on SQLite: frames are queued and written in batches, in order, on the
store's thread (see ``iris.state.sqlite``); a read runs there too, after every queued write.

Every chat-scoped frame is appended with its ``seq``. The log is bounded by count and age;
``floor(chat)`` is the highest seq dropped by those bounds, so a device whose last seen seq is
below the floor cannot be caught up frame by frame and gets a ``sync`` built from
``conversation(chat)`` instead.

Three things keep the log small without losing anything a device needs:

- a live message keeps one ``snapshot`` row, overwritten by each new one, and its text is stored
  once, as it grows: each snapshot that extends the last adds only what it added (a row of
  ``iris_live_text``), a rewrite replaces the text. The row holds the frame without its text;
  a read puts the text back (``FrameRules.snapshot_with``). So a reply of N characters writes
  O(N) bytes, not one snapshot per update (finding 1 of the second hardening pass);
- when a message closes (a frame the protocol marks ``closes``), its snapshot row and its text
  are deleted: the closing frame carries the text; the file is ``auto_vacuum=INCREMENTAL``,
  so the pages they held are given back;
- every closed message also goes into a transcript table (one row per message, the entry the
  protocol's ``transcript_entry`` makes), which is what a ``sync`` carries, with the same
  ``message_id``s the live frames used.

The log never names a frame type: what it may drop and keep comes from the ``FrameRules``
it is given (see ``iris.fanout.rules``).

With a shared store the log is ``iris.fanout.redis_log``'s (``frame_log_for`` picks).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from iris.errors import StoreUnavailable
from iris.fanout.redis_log import RedisFrameLog
from iris.fanout.rules import TRANSCRIPT_LIMIT, Body, Frame, FrameRules
from iris.fanout.subscription import encode_frame
from iris.state.redis_store import RedisStore
from iris.state.sqlite import Store, transaction

T = TypeVar("T")
log = logging.getLogger(__name__)


_DDL = """
CREATE TABLE IF NOT EXISTS iris_frames (
    chat_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    message_id TEXT,
    created REAL NOT NULL,
    frame TEXT NOT NULL,
    PRIMARY KEY (chat_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS iris_frames_message ON iris_frames (chat_id, message_id);
CREATE TABLE IF NOT EXISTS iris_chats (
    chat_id TEXT PRIMARY KEY,
    floor INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS iris_live_text (
    chat_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    part INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (chat_id, message_id, part)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS iris_log_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS iris_transcript (
    chat_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (chat_id, seq)
) WITHOUT ROWID;
"""

_PRUNE_EVERY = 64  # appends per chat between two bound checks
# A read waits behind the writes queued before it (so it sees them); while another process
# holds the lock that is bounded here, then the read fails with StoreUnavailable.
READ_WAIT = 2.0
MAX_PENDING = 20_000  # frames kept for a retry while the store is locked
# A live message's snapshots are written at most this often, or once its text grew by
# HOLD_CHARS: each write is a transaction that rewrites whole pages (240-350 bytes to disk per
# reply character when every update was written; 46 held 250 ms, 36-39 held 500 ms:
# bench/log_writes.py --rate 1000), and a kill -9 loses at most that much of the live text
# (any other frame, and every read, writes what is held at once).
HOLD_SECONDS = 0.5
HOLD_CHARS = 4096


class SqliteFrameLog:
    """Writes are queued (``append`` never waits; frames go to SQLite in batches on the store's
    thread, in order); reads run on that thread after every queued write."""

    def __init__(
        self,
        store: Store,
        *,
        rules: FrameRules,
        max_frames: int = 5_000,
        max_age: float = 24 * 3600,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.rules = rules
        marks = rules.marks
        # The types the statements below select by, from the protocol's marks.
        self._marked: dict[str, tuple[str, ...]] = {
            "snapshot": tuple(kind for kind, t in marks.items() if t.snapshot),
            "message": tuple(
                kind for kind, t in marks.items() if t.opens or t.snapshot or t.closes
            ),
            "turn": tuple(kind for kind, t in marks.items() if t.turn),
        }
        self.max_frames = max_frames
        self.max_age = max_age
        self._clock = clock
        self._appends: dict[str, int] = {}
        # (frame, its JSON, created, prune after) waiting for the store's thread.
        self._pending: deque[tuple[Frame, str, float, bool]] = deque()
        self._scheduled = threading.Event()
        # Snapshot holding (``_hold``): when the last write began, the text length of each
        # message's first held snapshot, and the loop's timer for the held ones.
        self._written = 0.0
        self._held: dict[tuple[str, str], int] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._soon = False  # a write is due at the loop's next turn (``_submit_soon``)
        # (chat_id, message_id) -> (the live text stored, its parts): the store's thread's own.
        self._texts: dict[tuple[str, str], tuple[str, int] | None] = {}
        store.ensure_schema(_DDL)
        store.before_close(self._flush)  # what is held is written when the store closes
        # One epoch per database file: its seqs never restart while the file lives (a file
        # replaced under a running server is refused by the store, see ``iris.state.sqlite``).
        store.execute(
            "INSERT OR IGNORE INTO iris_log_meta (key, value) VALUES ('epoch', ?)",
            (uuid.uuid4().hex[:16],),
        )
        self._epoch = str(store.query("SELECT value FROM iris_log_meta WHERE key='epoch'")[0][0])

    # -- writing -------------------------------------------------------------------------------
    shared = False  # this process alone appends: the hub counts each chat's seqs

    def sequence(
        self, chat_id: str, body: Body, delivered: int | None
    ) -> list[tuple[Frame, str | None]]:
        """Log one frame under the seq after ``delivered`` (the hub's count)."""
        seq = (self.last_seq(chat_id) if delivered is None else delivered) + 1
        frame = {**body, "chat_id": chat_id, "seq": seq}
        # Once, not once per device; a snapshot is stored without its text (see ``_write``).
        text = None if self.rules.traits(body["type"]).snapshot else encode_frame(frame)
        self.append(frame, text)
        return [(frame, text)]

    def fence(self, chat_id: str, key: str, token: str) -> None:
        """Nothing to fence: no other process writes this log."""

    def unfence(self, chat_id: str) -> None:
        """Nothing to fence: no other process writes this log."""

    def append(self, frame: Frame, text: str | None = None) -> None:
        """Log one sequenced frame; ``text`` is its JSON when the caller already made it."""
        if not self._store.available:
            return  # the file is gone (reported once by the store); devices still get frames
        chat_id = frame["chat_id"]
        count = self._appends.get(chat_id, 0) + 1
        self._appends[chat_id] = count
        if text is None:  # a snapshot's is made on the store's thread, without its text
            text = "" if self.rules.traits(frame["type"]).snapshot else json.dumps(frame)
        self._pending.append((frame, text, self._clock(), count % _PRUNE_EVERY == 0))
        if not self._hold(frame):
            self._submit_soon()

    def _submit_soon(self) -> None:
        """Write at the loop's next turn, so the frames one step of a turn publishes together
        (a person's message and the typing that follows it) share one transaction."""
        if self._soon or self._scheduled.is_set():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._submit()  # a synchronous caller: write now
            return
        self._soon = True
        loop.call_soon(self._submit)

    def _submit(self) -> None:
        self._timer = None
        self._soon = False
        if not self._scheduled.is_set() and self._store.available:
            self._scheduled.set()
            self._store.submit(self._flush)

    def _hold(self, frame: Frame) -> bool:
        """Whether this frame waits for the next write (``HOLD_SECONDS``/``HOLD_CHARS``)
        rather than being written now; the write is then scheduled on the event loop.

        A live message's snapshots are held, and so is its opening frame: a kill -9 before it
        is written loses at most what holding its text loses (the message's first moments),
        and a reply's start no longer costs a transaction of its own (each one writes every
        page it touches whole: 3 to 8 of them, bench/log_writes.py)."""
        traits = self.rules.traits(frame["type"])
        if not (traits.snapshot or traits.opens) or self._scheduled.is_set():
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False  # no loop to wait on (a synchronous caller): write now
        grown = False
        if traits.snapshot:
            key = (frame["chat_id"], str(frame.get("message_id")))
            size = len(self.rules.snapshot_text(frame))
            start = self._held.setdefault(key, size)
            grown = size - start >= HOLD_CHARS or size < start
        wait = self._written + HOLD_SECONDS - time.monotonic()
        if wait <= 0 or grown:
            return False
        if self._timer is None:
            self._timer = loop.call_later(wait, self._submit)
        return True

    def _flush(self, conn: sqlite3.Connection) -> None:
        """Write every queued frame in one transaction (on the store's thread). On failure the
        batch stays queued for the next flush: a lock that clears loses nothing."""
        self._scheduled.clear()  # before taking the batch: a later append schedules again
        self._written = time.monotonic()
        self._held.clear()
        batch: list[tuple[Frame, str, float, bool]] = []
        while self._pending:
            batch.append(self._pending.popleft())
        if not batch:
            return
        staged: dict[tuple[str, str], tuple[str, int] | None] = {}
        try:
            with transaction(conn):
                for frame, text, created, _ in batch:
                    self._write(conn, frame, text, created, staged)
        except BaseException:
            if len(self._pending) + len(batch) <= MAX_PENDING:
                self._pending.extendleft(reversed(batch))
            else:  # a lock held for very long: memory matters more than replay
                log.error("the iris frame log dropped %d frames it could not write", len(batch))
            raise
        closed = False
        for key, value in staged.items():
            if value is None:
                closed = True
                self._texts.pop(key, None)
            else:
                self._texts[key] = value
        if closed:  # give the closed messages' pages back to the file system
            conn.execute("PRAGMA incremental_vacuum")
        for frame, _, _, prune in batch:
            if prune:
                self._prune(conn, frame["chat_id"])

    def prune(self, chat_id: str) -> None:
        """Apply the count and age bounds; raise the chat's floor past what was dropped.

        Housekeeping: while the store is unavailable the log just stays longer (the floor
        still matches what it holds), so a failure here is logged, not raised."""
        try:
            self._read(lambda conn: self._prune(conn, chat_id))
        except StoreUnavailable as exc:
            log.warning("the frame log of %s was not pruned: %s", chat_id, exc.message)

    async def prune_idle(self) -> int:
        """Apply the bounds to every chat holding a frame past ``max_age``: an idle chat
        appends nothing, so the every-64-appends check never comes (a timer calls this).
        Returns how many chats were pruned."""

        def prune_all(conn: sqlite3.Connection) -> int:
            rows = conn.execute(
                "SELECT DISTINCT chat_id FROM iris_frames WHERE created < ?",
                (self._clock() - self.max_age,),
            ).fetchall()
            for row in rows:
                self._prune(conn, row["chat_id"])
            if rows:
                conn.execute("PRAGMA incremental_vacuum")
            return len(rows)

        return await self.read(prune_all)

    def _prune(self, conn: sqlite3.Connection, chat_id: str) -> None:
        by_count = conn.execute(
            "SELECT seq FROM iris_frames WHERE chat_id=? ORDER BY seq DESC LIMIT 1 OFFSET ?",
            (chat_id, self.max_frames),
        ).fetchall()
        by_age = conn.execute(
            "SELECT MAX(seq) AS seq FROM iris_frames WHERE chat_id=? AND created < ?",
            (chat_id, self._clock() - self.max_age),
        ).fetchall()
        cut = max([int(r["seq"]) for r in (*by_count, *by_age) if r["seq"] is not None], default=0)
        with transaction(conn):
            conn.execute(
                "DELETE FROM iris_transcript WHERE chat_id=? AND seq <= (SELECT seq FROM"
                " iris_transcript WHERE chat_id=? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                (chat_id, chat_id, TRANSCRIPT_LIMIT),
            )
            if cut <= _floor(conn, chat_id):
                return
            conn.execute("DELETE FROM iris_frames WHERE chat_id=? AND seq<=?", (chat_id, cut))
            conn.execute(
                "INSERT INTO iris_chats (chat_id, floor) VALUES (?, ?)"
                " ON CONFLICT(chat_id) DO UPDATE SET floor=excluded.floor",
                (chat_id, cut),
            )

    # -- reading -------------------------------------------------------------------------------
    def _after_writes(
        self, fn: Callable[[sqlite3.Connection], T]
    ) -> Callable[[sqlite3.Connection], T]:
        """``fn`` run once every frame appended so far is written."""

        def read(conn: sqlite3.Connection) -> T:
            self._flush(conn)
            return fn(conn)

        return read

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._store.call(self._after_writes(fn), wait=READ_WAIT)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A read for async callers: off the loop, waits as long as the store's busy timeout."""
        return await self._store.run(self._after_writes(fn))

    async def open_turns(self) -> list[str]:
        """Chats whose last turn began (typing on) and never ended: cut by a crash."""
        return await self.read(self._open_turns)

    def epoch(self, chat_id: str) -> str:
        """The log's epoch (the file's: this log's seqs restart only with a new file)."""
        return self._epoch

    def floor(self, chat_id: str) -> int:
        return self._read(lambda conn: _floor(conn, chat_id))

    def last_seq(self, chat_id: str) -> int:
        return self._read(lambda conn: _last_seq(conn, chat_id))

    def after(self, chat_id: str, seq: int, limit: int) -> list[Frame]:
        return self._read(
            lambda conn: [
                self._loaded(conn, row)
                for row in conn.execute(
                    "SELECT type, frame FROM iris_frames WHERE chat_id=? AND seq>? ORDER BY seq"
                    " LIMIT ?",
                    (chat_id, seq, limit),
                ).fetchall()
            ]
        )

    def messages(self, chat_id: str) -> list[dict[str, Any]]:
        """The chat as a list of messages: closed ones, then any reply still streaming."""
        return self._read(lambda conn: self._messages(conn, chat_id))

    def open_messages(self, chat_id: str) -> dict[str, str]:
        """Messages started and not closed, with their latest snapshot, oldest first."""
        return self._read(lambda conn: self._open_messages(conn, chat_id))

    def turn_open(self, chat_id: str) -> bool:
        """Did the chat's last turn start (typing on) and never end (typing off)?"""
        return self._read(lambda conn: self._turn_open(conn, chat_id))

    # -- statements, run on the store's thread -----------------------------------------------
    def _write(
        self,
        conn: sqlite3.Connection,
        frame: Frame,
        text: str,
        created: float,
        staged: dict[tuple[str, str], tuple[str, int] | None],
    ) -> None:
        chat_id, seq, kind = frame["chat_id"], frame["seq"], frame["type"]
        message_id = frame.get("message_id")
        traits = self.rules.traits(kind)
        if message_id and (traits.snapshot or traits.closes):
            # One snapshot row per live message: the new one replaces it (a close drops it).
            snapshots = self._marked["snapshot"]
            conn.execute(
                "DELETE FROM iris_frames WHERE chat_id=? AND message_id=?"
                f" AND type IN ({_marks(snapshots)})",
                (chat_id, message_id, *snapshots),
            )
        if message_id and traits.snapshot:
            text = encode_frame(self.rules.snapshot_with(frame, ""))
            self._store_text(conn, chat_id, message_id, self.rules.snapshot_text(frame), staged)
        elif message_id and traits.closes:
            conn.execute(
                "DELETE FROM iris_live_text WHERE chat_id=? AND message_id=?",
                (chat_id, message_id),
            )
            staged[(chat_id, message_id)] = None
        conn.execute(
            "INSERT INTO iris_frames (chat_id, seq, type, message_id, created, frame)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (chat_id, seq, kind, message_id, created, text),
        )
        entry = self.rules.transcript_entry(frame)
        if entry is not None:
            conn.execute(
                "INSERT INTO iris_transcript (chat_id, seq, message) VALUES (?, ?, ?)",
                (chat_id, seq, json.dumps(entry)),
            )

    def _store_text(
        self,
        conn: sqlite3.Connection,
        chat_id: str,
        message_id: str,
        text: str,
        staged: dict[tuple[str, str], tuple[str, int] | None],
    ) -> None:
        """The live message's text is now ``text``: add what it added, or replace it."""
        key = (chat_id, message_id)
        known = staged[key] if key in staged else self._texts.get(key)
        if known is not None and text.startswith(known[0]):
            stored, parts = known
            if len(text) > len(stored):
                conn.execute(
                    "INSERT INTO iris_live_text (chat_id, message_id, part, text)"
                    " VALUES (?, ?, ?, ?)",
                    (chat_id, message_id, parts, text[len(stored) :]),
                )
                parts += 1
        else:  # a rewrite, or a text this process did not store (a restart): whole
            conn.execute(
                "DELETE FROM iris_live_text WHERE chat_id=? AND message_id=?",
                (chat_id, message_id),
            )
            conn.execute(
                "INSERT INTO iris_live_text (chat_id, message_id, part, text) VALUES (?, ?, 0, ?)",
                (chat_id, message_id, text),
            )
            parts = 1
        staged[key] = (text, parts)

    def _live_text(self, conn: sqlite3.Connection, chat_id: str, message_id: str) -> str:
        rows = conn.execute(
            "SELECT text FROM iris_live_text WHERE chat_id=? AND message_id=? ORDER BY part",
            (chat_id, message_id),
        ).fetchall()
        return "".join(row["text"] for row in rows)

    def _loaded(self, conn: sqlite3.Connection, row: sqlite3.Row) -> Frame:
        """A stored frame as it was sent: a snapshot gets its message's text back."""
        frame: Frame = json.loads(row["frame"])
        if self.rules.traits(row["type"]).snapshot and frame.get("message_id"):
            text = self._live_text(conn, frame["chat_id"], frame["message_id"])
            frame = self.rules.snapshot_with(frame, text)
        return frame

    def _messages(self, conn: sqlite3.Connection, chat_id: str) -> list[dict[str, Any]]:
        rows = conn.execute(
            "SELECT message FROM iris_transcript WHERE chat_id=? ORDER BY seq DESC LIMIT ?",
            (chat_id, TRANSCRIPT_LIMIT),
        ).fetchall()
        messages: list[dict[str, Any]] = [json.loads(row["message"]) for row in reversed(rows)]
        closed = {m["message_id"] for m in messages}
        for message_id, text in self._open_messages(conn, chat_id).items():
            if message_id not in closed:
                messages.append({"message_id": message_id, "role": "assistant", "text": text})
        return messages

    def _open_messages(self, conn: sqlite3.Connection, chat_id: str) -> dict[str, str]:
        wanted = self._marked["message"]
        rows = conn.execute(
            "SELECT type, message_id, frame FROM iris_frames WHERE chat_id=? AND"
            f" type IN ({_marks(wanted)}) ORDER BY seq",
            (chat_id, *wanted),
        ).fetchall()
        live: dict[str, str] = {}
        for row in rows:
            message_id, traits = row["message_id"], self.rules.traits(row["type"])
            if traits.opens:
                live[message_id] = ""
            elif traits.snapshot:
                live[message_id] = self._live_text(conn, chat_id, message_id)
            else:
                live.pop(message_id, None)
        return live

    def _open_turns(self, conn: sqlite3.Connection) -> list[str]:
        turn = self._marked["turn"]
        rows = conn.execute(
            f"SELECT chat_id, frame FROM iris_frames AS f WHERE type IN ({_marks(turn)}) AND"
            " seq = (SELECT MAX(seq) FROM iris_frames WHERE chat_id=f.chat_id AND"
            f" type IN ({_marks(turn)}))",
            (*turn, *turn),
        ).fetchall()
        return [row["chat_id"] for row in rows if self.rules.turn_open(json.loads(row["frame"]))]

    def _turn_open(self, conn: sqlite3.Connection, chat_id: str) -> bool:
        turn = self._marked["turn"]
        rows = conn.execute(
            f"SELECT frame FROM iris_frames WHERE chat_id=? AND type IN ({_marks(turn)})"
            " ORDER BY seq DESC LIMIT 1",
            (chat_id, *turn),
        ).fetchall()
        return bool(rows) and self.rules.turn_open(json.loads(rows[0]["frame"]))


def _marks(values: Iterable[object]) -> str:
    """SQL placeholders for ``values`` (``NULL`` for none: ``IN (NULL)`` matches nothing)."""
    return ", ".join("?" for _ in values) or "NULL"


def _floor(conn: sqlite3.Connection, chat_id: str) -> int:
    rows = conn.execute("SELECT floor FROM iris_chats WHERE chat_id=?", (chat_id,)).fetchall()
    return int(rows[0]["floor"]) if rows else 0


def _last_seq(conn: sqlite3.Connection, chat_id: str) -> int:
    rows = conn.execute(
        "SELECT MAX(seq) AS seq FROM iris_frames WHERE chat_id=?", (chat_id,)
    ).fetchall()
    top = rows[0]["seq"]
    return max(int(top) if top is not None else 0, _floor(conn, chat_id))


def frame_log_for(
    store: Store,
    shared: RedisStore | None,
    *,
    rules: FrameRules,
    max_frames: int = 5_000,
    max_age: float = 24 * 3600,
) -> SqliteFrameLog | RedisFrameLog:
    """This process's SQLite log, or with a shared store (``store.url``) the one log per chat
    every process appends to (a ``Tailer`` then brings here what the others appended)."""
    if shared is None:
        return SqliteFrameLog(store, rules=rules, max_frames=max_frames, max_age=max_age)
    return RedisFrameLog(shared, rules=rules, max_frames=max_frames, max_age=max_age)

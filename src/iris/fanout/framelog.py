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

The per-chat frame log on a Redis Stream: one log every process appends to and reads.

The stream's entry id is the chat's seq (``<seq>-0``), so a resume is an exclusive range read
(``XRANGE (<after_seq>-0 +``) and a tailer's position is just the last seq it delivered. One Lua
script (``_APPEND``) does everything an append changes, atomically:

- ``INCR`` the chat's seq and ``XADD`` the frame under it (fields ``f``: the frame without
  ``chat_id``/``seq``, ``t``: when it was made) — two processes can never give out one seq;
- a live message keeps one snapshot in the log: a new ``snapshot`` frame ``XDEL``s the previous
  one of its message, and the frame that closes the message ``XDEL``s the last (the log never
  holds one full snapshot per token; a reader sees a gap in seqs there, as after a close today);
- a live message's text is stored once, as it grows, in ``chat:<id>:text:<message_id>``: a
  snapshot that extends what this process stored last ``APPEND``s what it added (anything else
  ``SET``s it whole), and its entry holds the frame without the text plus ``n``, the text's
  length in bytes then; a reader puts back the key's first ``n`` bytes. So a reply of N
  characters sends Redis O(N) bytes, not one snapshot per update (finding 1 of the second
  hardening pass). The close deletes the key;
- the transcript (what a ``sync`` carries) gets the closed message's entry;
- the chat's ``turn_open`` flag is set or cleared (the set of chats whose turn is open, which
  spans chats and so lives in another cluster slot, is written around the script: joined
  before a turn opens, left after it closes);
- every ``PRUNE_EVERY`` seqs the count and age bounds trim the stream (``XTRIM MINID``) and the
  chat's floor rises to the highest seq trimmed (never to an ``XDEL``'d snapshot: those were
  superseded, not lost);
- with a fence (a lease key and the token this process holds it with), nothing is appended
  when the lease is no longer ours: ``LeaseLost``.

It also returns the frames of the chat appended after ``delivered`` (by other processes), so
the hub hands them out before the new one and every process delivers one order.

The reads (``after``, ``floor``, ``last_seq``, ``conversation``, ``open_messages``,
``turn_open``, ``prune``) use the blocking client: each finishes in one step of the loop, as
the SQLite log's do, which is what ``Subscription`` relies on to switch from replay to live
without a gap. Every Redis failure is ``StoreUnavailable``.

Keys (``chat_key``: ``<prefix>{chat:<id>}:<suffix>``, one hash tag per chat, so the script's
keys share a Redis Cluster slot): ``log`` (stream), ``seq``, ``floor``, ``transcript`` (list),
``live`` (hash: ``o:<message_id>`` the seq that opened a live message, ``s:<message_id>`` the
seq of its one snapshot), ``turn_open`` (``1`` while the chat's turn is open), ``epoch``
(changes when the seqs restart), ``text:<message_id>`` (a live message's text), ``turn`` (the
turn lease, ``iris.state.turn_owners``); and ``<prefix>:chats:turn_open`` (set of chat ids,
touched alone).
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
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar, cast

from redis.commands.core import Script

from iris.errors import StoreUnavailable
from iris.fanout.hub import LogRestarted
from iris.fanout.rules import Body, Frame, FrameRules, Traits
from iris.fanout.subscription import encode_frame
from iris.formats.surrogates import clean
from iris.state.lease import LeaseLost
from iris.state.redis_store import RedisStore, translated
from iris.state.sqlite import Store, transaction

T = TypeVar("T")
log = logging.getLogger(__name__)

# The append script's keys, in its order (``text:<message_id>`` goes in at index 6).
_SCRIPT_KEYS = ("log", "seq", "floor", "transcript", "live", "turn_open", "epoch")

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
TRANSCRIPT_LIMIT = 500  # messages kept per chat for sync
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


PRUNE_EVERY = 64  # seqs per chat between two bound checks

# The count and age bounds: drop the oldest entries past ``max_frames`` and those made before
# ``oldest``; the floor rises to the highest seq dropped (an XDEL'd snapshot never counts).
_TRIM = """
local function trim(log, floor_key, max_frames, oldest)
  local cut = 0
  local excess = redis.call('XLEN', log) - max_frames
  if excess > 0 then
    local dropped = redis.call('XRANGE', log, '-', '+', 'COUNT', excess)
    cut = tonumber(string.match(dropped[#dropped][1], '^(%d+)'))
  end
  local from, young = '-', false
  while not young do
    local page = redis.call('XRANGE', log, from, '+', 'COUNT', 100)
    for _, entry in ipairs(page) do
      local fields = entry[2]
      for i = 1, #fields, 2 do
        if fields[i] == 't' and tonumber(fields[i + 1]) >= oldest then young = true end
      end
      if young then break end
      local seq = tonumber(string.match(entry[1], '^(%d+)'))
      if seq > cut then cut = seq end
    end
    if #page < 100 then break end
    from = '(' .. page[#page][1]
  end
  if cut > tonumber(redis.call('GET', floor_key) or '0') then
    redis.call('XTRIM', log, 'MINID', (cut + 1) .. '-0')
    redis.call('SET', floor_key, cut)
  end
end
"""

# KEYS: log, seq, floor, transcript, live, turn_open flag, message text, epoch[, fence key]
# ARGV: body, created, message_id, flags, transcript entry, delivered, chat_id,
#       max_frames, oldest kept created, prune every, transcript limit, fence token ('' none),
#       text offset (bytes already stored, for a snapshot), text to store from there,
#       a new epoch (taken if the chat has none), the epoch this process knows ('' none)
# flags: one letter each — s snapshot, o opens, c closes, T turn on, F turn off.
# Returns {-2, epoch} when the chat's epoch is not the one known (the log restarted: nothing
# appended), false when fenced out, {-1} when the stored text is not ``offset`` bytes long
# (the caller sends it whole), else {seq, the entries after ``delivered`` before seq, epoch}.
_APPEND = (
    _TRIM
    + """
redis.call('SET', KEYS[8], ARGV[15], 'NX')
local epoch = redis.call('GET', KEYS[8])
if ARGV[16] ~= '' and epoch ~= ARGV[16] then
  return {-2, epoch}
end
if #KEYS > 8 and redis.call('GET', KEYS[9]) ~= ARGV[12] then
  return false
end
local mid, flags = ARGV[3], ARGV[4]
local snapshot = mid ~= '' and string.find(flags, 's', 1, true)
local offset = tonumber(ARGV[13])
if snapshot and offset > 0 and redis.call('STRLEN', KEYS[7]) ~= offset then
  return {-1}
end
local seq = redis.call('INCR', KEYS[2])
local id = seq .. '-0'
if snapshot then
  local length
  if offset > 0 then
    length = redis.call('APPEND', KEYS[7], ARGV[14])
  else
    redis.call('SET', KEYS[7], ARGV[14])
    length = string.len(ARGV[14])
  end
  redis.call('XADD', KEYS[1], id, 'f', ARGV[1], 't', ARGV[2], 'n', length)
else
  redis.call('XADD', KEYS[1], id, 'f', ARGV[1], 't', ARGV[2])
end
if mid ~= '' then
  local held = redis.call('HGET', KEYS[5], 's:' .. mid)
  if string.find(flags, 's', 1, true) then
    if held then redis.call('XDEL', KEYS[1], held .. '-0') end
    redis.call('HSET', KEYS[5], 's:' .. mid, seq)
    redis.call('HSETNX', KEYS[5], 'o:' .. mid, seq)
  elseif string.find(flags, 'c', 1, true) then
    if held then redis.call('XDEL', KEYS[1], held .. '-0') end
    redis.call('HDEL', KEYS[5], 's:' .. mid, 'o:' .. mid)
    redis.call('DEL', KEYS[7])
  elseif string.find(flags, 'o', 1, true) then
    redis.call('HSETNX', KEYS[5], 'o:' .. mid, seq)
  end
end
if ARGV[5] ~= '' then
  redis.call('RPUSH', KEYS[4], ARGV[5])
  redis.call('LTRIM', KEYS[4], -tonumber(ARGV[11]), -1)
end
-- The epoch lives as long as the chat's log: a read made it with the age bound's expiry.
local kept = redis.call('PTTL', KEYS[1])
if kept > 0 then redis.call('PEXPIRE', KEYS[8], kept) else redis.call('PERSIST', KEYS[8]) end
if string.find(flags, 'T', 1, true) then
  redis.call('SET', KEYS[6], '1')
elseif string.find(flags, 'F', 1, true) then
  redis.call('DEL', KEYS[6])
end
if seq % tonumber(ARGV[10]) == 0 then
  trim(KEYS[1], KEYS[3], tonumber(ARGV[8]), tonumber(ARGV[9]))
end
local missed = {}
local delivered = tonumber(ARGV[6])
if delivered >= 0 and delivered < seq - 1 then
  missed = redis.call('XRANGE', KEYS[1], '(' .. delivered .. '-0', '(' .. id)
end
return {seq, missed, epoch}
"""
)

# The bounds alone (a resume's ``prune``). KEYS: log, floor; ARGV: max_frames, oldest kept.
_PRUNE = _TRIM + "trim(KEYS[1], KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]))\nreturn 1\n"

Entry = tuple[str, dict[str, str]]  # a stream entry as redis-py returns it: (id, fields)


class RedisFrameLog:
    """A chat's frames in a Redis Stream, shared by every process (see the module doc)."""

    shared = True  # other processes append to the same chats

    def __init__(
        self,
        store: RedisStore,
        *,
        rules: FrameRules,
        max_frames: int = 5_000,
        max_age: float = 24 * 3600,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.rules = rules
        self.max_frames = max_frames
        self.max_age = max_age
        self._clock = clock
        # chat_id -> (lease key, token): appends to the chat are refused once the lease is lost.
        self._fences: dict[str, tuple[str, str]] = {}
        # chat_id -> its log's epoch as this process last saw it (a change: the seqs restarted).
        self._epochs: dict[str, str] = {}
        # (chat_id, message_id) -> the live text this process stored last (UTF-8).
        self._texts: dict[tuple[str, str], bytes] = {}
        self._append: Script = store.sync.register_script(_APPEND)
        self._prune: Script = store.sync.register_script(_PRUNE)

    def key(self, chat_id: str, part: str) -> str:
        return self.store.chat_key(chat_id, part)

    def chat_of(self, log_key: str) -> str:
        """The chat id of a chat's ``log`` key."""
        head, tail = self.store.chat_key("", "log").split("}", 1)
        return log_key[len(head) : -len("}" + tail)]

    @property
    def _open_set(self) -> str:
        return self.store.key("chats", "turn_open")

    # -- writing -------------------------------------------------------------------------------
    def fence(self, chat_id: str, key: str, token: str) -> None:
        """From now on append to the chat only while the lease ``key`` holds ``token``."""
        self._fences[chat_id] = (key, token)

    def unfence(self, chat_id: str) -> None:
        self._fences.pop(chat_id, None)

    def sequence(
        self, chat_id: str, body: Body, delivered: int | None
    ) -> list[tuple[Frame, str | None]]:
        """Append one frame under the chat's next seq. Returns the frames to deliver here, in
        order: those other processes appended after ``delivered`` (None: none wanted), then
        this one. Raises ``StoreUnavailable`` (``LeaseLost`` when fenced out)."""
        traits = self.rules.traits(body["type"])
        flags = self._flags(body, traits)
        message_id = body.get("message_id")
        mid = message_id if isinstance(message_id, str) else ""
        shell, text, offset = self._encoded(chat_id, mid, body, traits)
        entry = self.rules.transcript_entry(dict(body))
        keys = [self.key(chat_id, part) for part in _SCRIPT_KEYS]
        keys.insert(6, self.key(chat_id, f"text:{mid}"))
        now = self._clock()
        fence = self._fences.get(chat_id)
        args: list[str | int | float | bytes] = [
            shell,
            repr(now),
            mid,
            flags,
            "" if entry is None else json.dumps(entry),
            -1 if delivered is None else delivered,
            chat_id,
            self.max_frames,
            repr(now - self.max_age),
            PRUNE_EVERY,
            TRANSCRIPT_LIMIT,
            fence[1] if fence is not None else "",
            offset,
            text[offset:],
            uuid.uuid4().hex[:16],
            self._epochs.get(chat_id, ""),
        ]
        if fence is not None:
            keys.append(fence[0])
        seq, missed = self._appended(chat_id, flags, keys, args, text)
        if mid and traits.snapshot:
            self._texts[(chat_id, mid)] = text
        elif mid and traits.closes:
            self._texts.pop((chat_id, mid), None)
        frames = self._frames(chat_id, [_entry(item) for item in missed])
        frame = {**body, "chat_id": chat_id, "seq": seq}
        out: list[tuple[Frame, str | None]] = [(f, None) for f in frames]
        # A snapshot is not encoded whole here (the hub encodes what devices need).
        return [*out, (frame, None if traits.snapshot else encode_frame(frame))]

    def _flags(self, body: Body, traits: Traits) -> str:
        """What the append script does besides appending: ``s`` a snapshot, ``o`` it opens a
        message, ``c`` it closes one; ``T``/``F`` the turn opens or closes."""
        pairs = (("s", traits.snapshot), ("o", traits.opens), ("c", traits.closes))
        flags = "".join(letter for letter, on in pairs if on)
        if traits.turn:
            flags += "T" if self.rules.turn_open(dict(body)) else "F"
        return flags

    def _encoded(
        self, chat_id: str, mid: str, body: Body, traits: Traits
    ) -> tuple[str, bytes, int]:
        """The frame's JSON (a snapshot's without its text), the snapshot's text as UTF-8, and
        how much of it the log holds already (only the rest is sent)."""
        if not (mid and traits.snapshot):
            return encode_frame(dict(body)), b"", 0
        shell = encode_frame(self.rules.snapshot_with(dict(body), ""))
        # The text as UTF-8 the way a frame's JSON is (a lone surrogate becomes U+FFFD).
        said = self.rules.snapshot_text(dict(body))
        text = (said if said.isascii() else clean(said)).encode()
        stored = self._texts.get((chat_id, mid))
        return shell, text, len(stored) if stored is not None and text.startswith(stored) else 0

    def _appended(
        self,
        chat_id: str,
        flags: str,
        keys: list[str],
        args: list[str | int | float | bytes],
        text: bytes,
    ) -> tuple[int, list[Any]]:
        """Run the append script: the frame's seq and the entries other processes appended
        after the delivered seq. Raises ``LogRestarted``, ``LeaseLost``, ``StoreUnavailable``."""
        with translated(self.store.url, "the frame log failed"):
            if "T" in flags:  # listed before it opens: a crash after leaves no turn unlisted
                self.store.sync.sadd(self._open_set, chat_id)
            reply = self._append(keys=keys, args=args)
            if reply is not None and reply[0] == -1:  # another process stored the text
                args[-4:-2] = [0, text]
                reply = self._append(keys=keys, args=args)
            if "F" in flags and reply is not None and reply[0] not in (-1, -2):
                self._unlist(chat_id)
        if reply is not None and reply[0] == -2:  # the chat's seqs restarted: data was lost
            self._epochs[chat_id] = str(reply[1])
            raise LogRestarted(chat_id, str(reply[1]))
        if reply is None:
            raise LeaseLost(f"chat {chat_id}: this process no longer holds its turn")
        seq, missed, epoch = cast("tuple[int, list[Any], str]", reply)
        self._epochs[chat_id] = str(epoch)
        return int(seq), missed

    def prune(self, chat_id: str) -> None:
        """Apply the count and age bounds now; a failure is logged (the log just stays longer)."""
        try:
            with translated(self.store.url, "the frame log failed"):
                self._prune(
                    keys=[self.key(chat_id, "log"), self.key(chat_id, "floor")],
                    args=[self.max_frames, repr(self._clock() - self.max_age)],
                )
        except StoreUnavailable as exc:
            log.warning("the frame log of %s was not pruned: %s", chat_id, exc.message)

    async def prune_idle(self) -> int:
        """Apply the bounds to every chat's log (an idle chat appends nothing, so the
        every-``PRUNE_EVERY``-seqs check never comes; a timer calls this): ``SCAN`` for the
        logs, in a thread. Returns how many logs were looked at."""
        return await asyncio.to_thread(self._prune_all)

    def _prune_all(self) -> int:
        count = 0
        with translated(self.store.url, "the frame log failed"):
            for key in self.store.sync.scan_iter(match=self.key("*", "log"), count=500):
                self.prune(self.chat_of(cast("str", key)))
                count += 1
        return count

    # -- reading -------------------------------------------------------------------------------
    def epoch(self, chat_id: str) -> str:
        """The chat's log epoch: it changes whenever the chat's seqs restart (Redis lost its
        data: a restart without persistence, ``FLUSHDB``, a failover). Made when missing, with
        the age bound as its expiry: a chat that never gets a frame (a device that named any
        chat id) leaves no key behind; the first append gives it the log's expiry."""
        key = self.key(chat_id, "epoch")
        with translated(self.store.url, "the frame log failed"):
            pipe = self.store.sync.pipeline(transaction=True)
            pipe.set(key, uuid.uuid4().hex[:16], nx=True, ex=max(1, int(self.max_age)))
            pipe.get(key)
            epoch = str(pipe.execute()[-1])
        return epoch

    def floor(self, chat_id: str) -> int:
        with translated(self.store.url, "the frame log failed"):
            return int(cast("str | None", self.store.sync.get(self.key(chat_id, "floor"))) or 0)

    def last_seq(self, chat_id: str) -> int:
        with translated(self.store.url, "the frame log failed"):
            value = cast("str | None", self.store.sync.get(self.key(chat_id, "seq")))
        return int(value or 0)

    def after(self, chat_id: str, seq: int, limit: int) -> list[Frame]:
        with translated(self.store.url, "the frame log failed"):
            entries = cast(
                "list[Entry]",
                self.store.sync.xrange(self.key(chat_id, "log"), f"({seq}-0", "+", count=limit),
            )
        return self._frames(chat_id, entries)

    def frames(self, chat_id: str, entries: Sequence[Entry], after: int = 0) -> list[Frame]:
        """Stream entries of the chat (e.g. from ``XREAD``) past seq ``after`` as frames; of a
        message's snapshots only the last is kept (it supersedes the others)."""
        wanted = [entry for entry in entries if _seq(entry) > after]
        last: dict[str, int] = {}
        for index, entry in enumerate(wanted):
            if "n" in entry[1]:
                last[json.loads(entry[1]["f"]).get("message_id", "")] = index
        kept = set(last.values())
        return self._frames(
            chat_id, [e for i, e in enumerate(wanted) if "n" not in e[1] or i in kept]
        )

    def _frames(self, chat_id: str, entries: Sequence[Entry]) -> list[Frame]:
        """Entries as frames; a snapshot gets its message's text back (the first ``n`` bytes
        of the stored text). One whose text is gone or was rewritten since is left out: a
        later frame of its message, in the log, supersedes it."""
        frames = [_frame(chat_id, entry) for entry in entries]
        snapshots = [
            (frame, int(entry[1]["n"]))
            for frame, entry in zip(frames, entries, strict=True)
            if "n" in entry[1]
        ]
        if not snapshots:
            return frames
        keys = [self.key(chat_id, f"text:{frame.get('message_id', '')}") for frame, _ in snapshots]
        with translated(self.store.url, "the frame log failed"):
            try:
                pipe = self.store.sync.pipeline(transaction=False)
                for key, (_, length) in zip(keys, snapshots, strict=True):
                    pipe.getrange(key, 0, max(length - 1, 0))
                texts = cast("list[str | None]", pipe.execute())
            except UnicodeDecodeError:  # a text rewritten since, cut mid-character: one by one
                texts = [
                    _text_or_none(self.store, key, length)
                    for key, (_, length) in zip(keys, snapshots, strict=True)
                ]
        stale: set[int] = set()
        for (frame, length), text in zip(snapshots, texts, strict=True):
            found = (text or "") if length > 0 else ""
            if text is None or len(found.encode()) != length:
                stale.add(id(frame))
            else:
                frame.update(self.rules.snapshot_with(frame, found))
        return [frame for frame in frames if id(frame) not in stale]

    def messages(self, chat_id: str) -> list[dict[str, Any]]:
        """The chat as a list of messages: closed ones, then any reply still streaming."""
        with translated(self.store.url, "the frame log failed"):
            rows = cast(
                "list[str]",
                self.store.sync.lrange(self.key(chat_id, "transcript"), -TRANSCRIPT_LIMIT, -1),
            )
        messages: list[dict[str, Any]] = [json.loads(row) for row in rows]
        closed = {m["message_id"] for m in messages}
        for message_id, text in self.open_messages(chat_id).items():
            if message_id not in closed:
                messages.append({"message_id": message_id, "role": "assistant", "text": text})
        return messages

    def open_messages(self, chat_id: str) -> dict[str, str]:
        """Messages started and not closed, with their latest snapshot, oldest first."""
        log_key = self.key(chat_id, "log")
        with translated(self.store.url, "the frame log failed"):
            live = cast("dict[str, str]", self.store.sync.hgetall(self.key(chat_id, "live")))
            opened = sorted(
                (int(seq), field[2:]) for field, seq in live.items() if field.startswith("o:")
            )
            snapshots = [live.get(f"s:{message_id}") for _, message_id in opened]
            pipe = self.store.sync.pipeline(transaction=False)
            for seq in snapshots:
                if seq is not None:
                    pipe.xrange(log_key, f"{seq}-0", f"{seq}-0")
            found = iter(cast("list[list[Entry]]", pipe.execute()) if any(snapshots) else [])
        texts: dict[str, str] = {}
        for (_, message_id), seq in zip(opened, snapshots, strict=True):
            entries = next(found) if seq is not None else []
            frame = next(iter(self._frames(chat_id, entries)), None)
            texts[message_id] = "" if frame is None else self.rules.snapshot_text(frame)
        return texts

    def _unlist(self, chat_id: str) -> None:
        """Take a closed turn's chat off the set of open ones; a turn opened meanwhile by
        another process (its flag set again) stays listed."""
        self.store.sync.srem(self._open_set, chat_id)
        if self.store.sync.get(self.key(chat_id, "turn_open")) is not None:
            self.store.sync.sadd(self._open_set, chat_id)

    def turn_open(self, chat_id: str) -> bool:
        """Did the chat's last turn start (typing on) and never end (typing off)?"""
        with translated(self.store.url, "the frame log failed"):
            return self.store.sync.get(self.key(chat_id, "turn_open")) is not None

    async def open_turns(self) -> list[str]:
        """Chats whose last turn began and never ended (on any process): the listed chats
        whose flag is set (one key each: in a cluster they live on every shard)."""
        with translated(self.store.url, "the frame log failed"):
            members = sorted(cast("set[str]", await self.store.aio.smembers(self._open_set)))  # pyright: ignore[reportUnknownMemberType]
            if not members:
                return []
            async with self.store.aio.pipeline(transaction=False) as pipe:
                for chat_id in members:
                    pipe.get(self.key(chat_id, "turn_open"))
                flags = cast("list[str | None]", await pipe.execute())
        return [chat for chat, flag in zip(members, flags, strict=True) if flag is not None]


def _entry(item: Any) -> Entry:
    """A raw ``[id, [field, value, ...]]`` entry from the script, as ``XRANGE`` gives it."""
    entry_id, flat = item
    fields = cast("list[str]", flat)
    return str(entry_id), dict(zip(fields[::2], fields[1::2], strict=True))


def _text_or_none(store: RedisStore, key: str, length: int) -> str | None:
    try:
        return cast("str", store.sync.getrange(key, 0, max(length - 1, 0)))
    except UnicodeDecodeError:
        return None


def _seq(entry: Entry) -> int:
    return int(entry[0].split("-", 1)[0])


def _frame(chat_id: str, entry: Entry) -> Frame:
    entry_id, fields = entry
    frame: Frame = json.loads(fields["f"])
    frame["chat_id"] = chat_id
    frame["seq"] = int(entry_id.split("-", 1)[0])
    return frame


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

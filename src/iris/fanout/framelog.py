"""The per-chat frame log in SQLite: what a reconnecting device replays, and the transcript.

Every chat-scoped frame is appended with its ``seq``. The log is bounded by count and age;
``floor(chat)`` is the highest seq dropped by those bounds, so a device whose last seen seq is
below the floor cannot be caught up frame by frame and gets a ``sync`` built from
``conversation(chat)`` instead.

Two things keep the log small without losing anything a device needs:

- when a message closes (``message.stop`` / ``commentary``), its ``message.update`` frames are
  deleted: each was a full snapshot superseded by the closing frame's text;
- every closed message also goes into a transcript table (one row per message), which is what a
  ``sync`` carries, with the same ``message_id``s the live frames used.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from iris.store import Store

Frame = dict[str, Any]

_DDL = """
CREATE TABLE IF NOT EXISTS iris_frames (
    chat_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    message_id TEXT,
    created REAL NOT NULL,
    frame TEXT NOT NULL,
    PRIMARY KEY (chat_id, seq)
);
CREATE INDEX IF NOT EXISTS iris_frames_message ON iris_frames (chat_id, message_id);
CREATE TABLE IF NOT EXISTS iris_chats (
    chat_id TEXT PRIMARY KEY,
    floor INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS iris_transcript (
    chat_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (chat_id, seq)
);
"""

_CLOSERS = ("message.stop", "commentary")
_PRUNE_EVERY = 64  # appends per chat between two bound checks
TRANSCRIPT_LIMIT = 500  # messages kept per chat for sync


class FrameLog:
    def __init__(
        self,
        store: Store,
        *,
        max_frames: int = 5_000,
        max_age: float = 24 * 3600,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.max_frames = max_frames
        self.max_age = max_age
        self._clock = clock
        self._appends: dict[str, int] = {}
        store.ensure_schema(_DDL)

    # -- writing -------------------------------------------------------------------------------
    def append(self, frame: Frame, text: str | None = None) -> None:
        """Log one sequenced frame; ``text`` is its JSON when the caller already made it."""
        chat_id, seq, kind = frame["chat_id"], frame["seq"], frame["type"]
        message_id = frame.get("message_id")
        self._store.execute(
            "INSERT INTO iris_frames (chat_id, seq, type, message_id, created, frame)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (chat_id, seq, kind, message_id, self._clock(), text or json.dumps(frame)),
        )
        if kind in _CLOSERS and message_id:
            self._store.execute(
                "DELETE FROM iris_frames WHERE chat_id=? AND message_id=? AND type='message.update'",
                (chat_id, message_id),
            )
        entry = transcript_entry(frame)
        if entry is not None:
            self._store.execute(
                "INSERT INTO iris_transcript (chat_id, seq, message) VALUES (?, ?, ?)",
                (chat_id, seq, json.dumps(entry)),
            )
        count = self._appends.get(chat_id, 0) + 1
        self._appends[chat_id] = count
        if count % _PRUNE_EVERY == 0:
            self.prune(chat_id)

    def prune(self, chat_id: str) -> None:
        """Apply the count and age bounds; raise the chat's floor past what was dropped."""
        by_count = self._store.query(
            "SELECT seq FROM iris_frames WHERE chat_id=? ORDER BY seq DESC LIMIT 1 OFFSET ?",
            (chat_id, self.max_frames),
        )
        by_age = self._store.query(
            "SELECT MAX(seq) AS seq FROM iris_frames WHERE chat_id=? AND created < ?",
            (chat_id, self._clock() - self.max_age),
        )
        cut = max([int(r["seq"]) for r in (*by_count, *by_age) if r["seq"] is not None], default=0)
        self._store.execute(
            "DELETE FROM iris_transcript WHERE chat_id=? AND seq <= (SELECT seq FROM"
            " iris_transcript WHERE chat_id=? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
            (chat_id, chat_id, TRANSCRIPT_LIMIT),
        )
        if cut <= self.floor(chat_id):
            return
        self._store.execute("DELETE FROM iris_frames WHERE chat_id=? AND seq<=?", (chat_id, cut))
        self._store.execute(
            "INSERT INTO iris_chats (chat_id, floor) VALUES (?, ?)"
            " ON CONFLICT(chat_id) DO UPDATE SET floor=excluded.floor",
            (chat_id, cut),
        )

    # -- reading -------------------------------------------------------------------------------
    def floor(self, chat_id: str) -> int:
        rows = self._store.query("SELECT floor FROM iris_chats WHERE chat_id=?", (chat_id,))
        return int(rows[0]["floor"]) if rows else 0

    def last_seq(self, chat_id: str) -> int:
        rows = self._store.query(
            "SELECT MAX(seq) AS seq FROM iris_frames WHERE chat_id=?", (chat_id,)
        )
        top = rows[0]["seq"]
        return max(int(top) if top is not None else 0, self.floor(chat_id))

    def after(self, chat_id: str, seq: int, limit: int) -> list[Frame]:
        rows = self._store.query(
            "SELECT frame FROM iris_frames WHERE chat_id=? AND seq>? ORDER BY seq LIMIT ?",
            (chat_id, seq, limit),
        )
        return [json.loads(row["frame"]) for row in rows]

    def conversation(self, chat_id: str) -> list[dict[str, Any]]:
        """The chat as a list of messages: closed ones, then any reply still streaming."""
        rows = self._store.query(
            "SELECT message FROM iris_transcript WHERE chat_id=? ORDER BY seq DESC LIMIT ?",
            (chat_id, TRANSCRIPT_LIMIT),
        )
        messages: list[dict[str, Any]] = [json.loads(row["message"]) for row in reversed(rows)]
        closed = {m["message_id"] for m in messages}
        for message_id, text in self.open_messages(chat_id).items():
            if message_id not in closed:
                messages.append({"message_id": message_id, "role": "assistant", "text": text})
        return messages

    def open_messages(self, chat_id: str) -> dict[str, str]:
        """Messages started and not closed, with their latest snapshot, oldest first."""
        rows = self._store.query(
            "SELECT type, message_id, frame FROM iris_frames WHERE chat_id=? AND"
            " type IN ('message.start', 'message.update', 'message.stop', 'commentary')"
            " ORDER BY seq",
            (chat_id,),
        )
        live: dict[str, str] = {}
        for row in rows:
            message_id = row["message_id"]
            if row["type"] == "message.start":
                live[message_id] = ""
            elif row["type"] == "message.update":
                live[message_id] = json.loads(row["frame"])["text"]
            else:
                live.pop(message_id, None)
        return live

    def turn_open(self, chat_id: str) -> bool:
        """Did the chat's last turn start (typing on) and never end (typing off)?"""
        rows = self._store.query(
            "SELECT frame FROM iris_frames WHERE chat_id=? AND type='typing'"
            " ORDER BY seq DESC LIMIT 1",
            (chat_id,),
        )
        return bool(rows) and json.loads(rows[0]["frame"])["on"] is True


def transcript_entry(frame: Frame) -> dict[str, Any] | None:
    """The message a closing frame leaves in the conversation, in the shape ``sync`` sends."""
    kind = frame["type"]
    if kind == "message":
        entry = {"message_id": frame["message_id"], "role": frame["role"], "text": frame["text"]}
    elif kind == "message.stop":
        entry = {
            "message_id": frame["message_id"],
            "role": "assistant",
            "text": frame["final_text"],
        }
    elif kind == "commentary":
        return {"message_id": frame["message_id"], "role": "commentary", "text": frame["text"]}
    else:
        return None
    for key in ("reasoning", "model", "tokens"):
        if key in frame:
            entry[key] = frame[key]
    return entry

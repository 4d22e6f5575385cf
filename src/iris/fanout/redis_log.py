"""The per-chat frame log on a Redis Stream: one log every process appends to and reads.

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
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, cast

from redis.commands.core import Script

from iris.errors import StoreUnavailable
from iris.fanout.hub import LogRestarted
from iris.fanout.rules import TRANSCRIPT_LIMIT, Body, Frame, FrameRules, Traits
from iris.fanout.subscription import encode_frame
from iris.formats.surrogates import clean
from iris.state.lease import LeaseLost
from iris.state.redis_store import RedisStore, translated

log = logging.getLogger(__name__)

# The append script's keys, in its order (``text:<message_id>`` goes in at index 6).
_SCRIPT_KEYS = ("log", "seq", "floor", "transcript", "live", "turn_open", "epoch")
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

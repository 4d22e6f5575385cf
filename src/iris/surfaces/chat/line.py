"""The line of one chat platform's messages waiting for a turn slot: bounded, first come first served.

Over ``server.max_turns`` (every surface together) or the user's ``max_turns_per_user``, a chat
message waits here instead of being told "busy": a person expects to wait in line, not to be
told to come back. Each slot given back, by any surface, goes to the first message in line
whose user is under their own limit (one user at their limit does not hold up the others).
Only a message that finds ``size`` messages waiting already is turned away (``None``), or one
whose user already has ``key_limit`` (``max_turns_per_user``) messages waiting: one user's many
chats or forum topics cannot fill the line and leave everyone else "busy".

A ``Place`` is one message's place in line; whoever holds it either takes its slot
(``wait``) or ``leave``s, which also gives back a slot granted but never taken (a handler
cancelled at shutdown): no slot is lost either way.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from iris.turn_slots import TurnLimiter, TurnSlot


class Place:
    """One message's place in a ``Line``."""

    def __init__(self, line: Line, key: str, key_limit: int | None) -> None:
        self._line = line
        self.key = key
        self.key_limit = key_limit
        self.granted: asyncio.Future[TurnSlot] = asyncio.get_running_loop().create_future()
        self._taken = False

    def ahead(self) -> int:
        """How many messages wait before this one (0: it is next)."""
        return self._line.ahead(self)

    async def wait(self) -> TurnSlot:
        """Until a slot is free for it; the slot is the caller's to release."""
        slot = await self.granted
        self._taken = True
        return slot

    def leave(self) -> None:
        """Out of the line; a slot granted and not taken goes back."""
        self._line.discard(self)
        if self.granted.done():
            if not self.granted.cancelled() and not self._taken:
                self._taken = True
                self.granted.result().release()
        else:
            self.granted.cancel()


class Line:
    """A bounded line of chat messages waiting for a slot of ``turns``."""

    def __init__(self, turns: TurnLimiter, size: int) -> None:
        self._turns = turns
        self.size = size
        self._waiting: deque[Place] = deque()
        self._unsubscribe: Callable[[], None] | None = turns.on_release(self._serve)

    def __len__(self) -> int:
        return len(self._waiting)

    def join(self, key: str, key_limit: int | None) -> TurnSlot | Place | None:
        """A slot at once; else a place in line; ``None`` when the line is full, or holds
        ``key_limit`` places of ``key`` already."""
        slot = self._turns.acquire(key, key_limit)
        if slot is not None:
            return slot
        if len(self._waiting) >= self.size:
            return None
        if key_limit is not None and sum(p.key == key for p in self._waiting) >= key_limit:
            return None  # this user's share of the line is taken
        place = Place(self, key, key_limit)
        self._waiting.append(place)
        return place

    def ahead(self, place: Place) -> int:
        for index, waiting in enumerate(self._waiting):
            if waiting is place:
                return index
        return 0

    def discard(self, place: Place) -> None:
        if place in self._waiting:
            self._waiting.remove(place)

    def close(self) -> None:
        """Stop taking slots given back; everyone still waiting leaves."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        while self._waiting:
            self._waiting.popleft().leave()

    def _serve(self) -> None:
        """A slot was given back: the first ones in line that may run now get one."""
        for place in list(self._waiting):
            if place.granted.done():  # cancelled while waiting
                self._waiting.remove(place)
                continue
            slot = self._turns.acquire(place.key, place.key_limit)
            if slot is None:
                if self._turns.running >= self._turns.limit:
                    return  # nothing free at all: the rest wait
                continue  # this user is at their own limit: the next one may go
            self._waiting.remove(place)
            place.granted.set_result(slot)

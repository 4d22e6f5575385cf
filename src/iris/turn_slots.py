"""Turn slots: how many agent turns run at once, across every surface and per caller.

Every surface takes a slot before it starts a turn and gives it back when the turn ends
(``server.max_turns`` in all; optionally also a per-caller bound keyed by, say, an iris device
token or a chat platform user). When no slot is free the caller is told at once — a 429, an
``error`` frame ``busy`` — so nothing waits in an unbounded queue; a chat message waits in its
platform's bounded line instead (``iris.surfaces.chat.line``), which ``on_release`` tells of
every slot given back.
"""

from __future__ import annotations

from collections.abc import Callable


class TurnSlot:
    """One running turn's place; ``release`` gives it back (once, however often called)."""

    def __init__(self, limiter: TurnLimiter, key: str | None) -> None:
        self._limiter: TurnLimiter | None = limiter
        self._key = key

    def release(self) -> None:
        limiter, self._limiter = self._limiter, None
        if limiter is not None:
            limiter._give_back(self._key)  # pyright: ignore[reportPrivateUsage]


class TurnLimiter:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0
        self._per_key: dict[str, int] = {}
        self._listeners: list[Callable[[], None]] = []

    def acquire(self, key: str | None = None, key_limit: int | None = None) -> TurnSlot | None:
        """A slot, or None when ``limit`` turns run already (or ``key_limit`` for ``key``)."""
        if self.running >= self.limit:
            return None
        if key is not None and key_limit is not None and self._per_key.get(key, 0) >= key_limit:
            return None
        self.running += 1
        if key is not None:
            self._per_key[key] = self._per_key.get(key, 0) + 1
        return TurnSlot(self, key)

    def on_release(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` after each slot is given back; returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def running_for(self, key: str) -> int:
        return self._per_key.get(key, 0)

    def _give_back(self, key: str | None) -> None:
        self.running -= 1
        if key is not None:
            left = self._per_key[key] - 1
            if left:
                self._per_key[key] = left
            else:
                del self._per_key[key]  # keys are callers: do not keep one per caller ever seen
        for listener in list(self._listeners):
            listener()

"""The inbound rate of one connection: how fast a device may send frames. Pure.

A token bucket: ``burst`` frames at once, then ``rate`` a second. ``take(now)`` says whether
one more frame fits; ``over`` counts the frames refused since the last one that fit, so the
transport can answer the first refusal with an error and close on a flood that goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FrameBucket:
    rate: float  # frames a second, sustained
    burst: int  # frames at once
    over: int = 0  # frames refused since the last one allowed
    _tokens: float = field(init=False)
    _at: float | None = None

    def __post_init__(self) -> None:
        self._tokens = float(self.burst)

    def take(self, now: float) -> bool:
        """Spend one frame's worth at time ``now``; False (and ``over`` + 1) if none is left."""
        if self._at is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            self.over = 0
            return True
        self.over += 1
        return False

"""The reveal scheduler (typewriter): shows the latest snapshot at a steady, adjustable rate.

Snapshots arrive in bursts at the gateway's cadence; revealing them at ``60 / smoothness``
characters per second reads calmly instead of jumping per update. Two rules keep it honest:

* the rate grows with the backlog (``max(base, backlog / 0.75 s)``), so a model that outpaces
  the base rate is followed smoothly instead of piling up until the catch-up jump fires;
* when a snapshot leaves a backlog of more than 2 s of reveal time, everything is revealed at
  once. "Reveal time" is measured at the faster of the rate in force and the rate text had been
  arriving at, so a model that sends big bursts at a steady pace is followed, while a reconnect
  or a dump (far more text than the stream has been carrying) jumps.

Pure: it takes ``now`` from the caller and never reads a clock itself.
"""

from __future__ import annotations

import os

from iris.app.core.graphemes import boundary_at_or_after, boundary_at_or_before

SMOOTHNESS_MIN = 0.2
SMOOTHNESS_MAX = 0.8
CATCH_UP_SECONDS = 2.0
BACKLOG_SECONDS = 0.75  # the proportional rate drains any backlog in about this long
_MIN_INTERVAL = 1 / 30  # snapshots closer than a frame count as one burst


def chars_per_second(smoothness: float) -> float:
    """Settings' "Streaming speed" (seconds between visible updates) as a reveal rate."""
    clamped = min(max(smoothness, SMOOTHNESS_MIN), SMOOTHNESS_MAX)
    return 60.0 / clamped


class Reveal:
    """The revealed prefix of one bubble's latest snapshot."""

    def __init__(self, smoothness: float, now: float) -> None:
        self._base = chars_per_second(smoothness)
        self._rate = self._base
        self._last = now
        self._budget = 0.0  # fractional characters owed from earlier ticks
        self._inflow = 0.0  # smoothed characters per second arriving in snapshots
        self._last_push = now
        self.target = ""
        self.shown = 0  # characters of `target` revealed
        self.jumps = 0  # catch-up jumps taken, for tests and the benchmark

    @property
    def text(self) -> str:
        return self.target[: self.shown]

    @property
    def caught_up(self) -> bool:
        return self.shown >= len(self.target)

    @property
    def rate(self) -> float:
        """Characters per second in force until the next tick."""
        return self._rate

    @property
    def base_rate(self) -> float:
        return self._base

    def set_smoothness(self, smoothness: float) -> None:
        """A rate change applies at once, keeping any backlog speed-up."""
        old_base = self._base
        self._base = chars_per_second(smoothness)
        self._rate = max(self._base, self._rate if self._rate > old_base else 0.0)

    def push(self, snapshot: str, now: float) -> None:
        """A new full snapshot; a rewrite restarts from the common prefix."""
        added = len(snapshot) - len(self.target)
        if not snapshot.startswith(self.target):
            common = len(os.path.commonprefix([self.target, snapshot]))
            self.shown = boundary_at_or_before(snapshot, min(self.shown, common))
            added = len(snapshot) - common
        self.target = snapshot
        backlog = len(snapshot) - self.shown
        if backlog > CATCH_UP_SECONDS * max(self._rate, self._inflow):
            self.jumps += 1
            self.finish()
        # Measured after the decision: the burst being judged must not vouch for itself.
        since = max(now - self._last_push, _MIN_INTERVAL)
        self._last_push = now
        self._inflow = 0.5 * self._inflow + 0.5 * (max(added, 0) / since)

    def finish(self) -> None:
        """Reveal everything now (Streaming off, or the view is replaced)."""
        self.shown = len(self.target)
        self._budget = 0.0

    def tick(self, now: float) -> bool:
        """Advance to ``now``; returns True if more text is shown."""
        elapsed = max(0.0, now - self._last)
        self._last = now
        backlog = len(self.target) - self.shown
        if backlog <= 0:
            self._budget = 0.0
            self._rate = self._base
            return False
        self._budget += self._rate * elapsed
        step = int(self._budget)
        if step == 0:
            return False
        before = self.shown
        self.shown = boundary_at_or_after(self.target, min(len(self.target), before + step))
        self._budget = max(0.0, self._budget - (self.shown - before))
        remaining = len(self.target) - self.shown
        self._rate = max(self._base, remaining / BACKLOG_SECONDS)
        return True

"""A chat surface's scheduler on a clock ahead of now, for the tests of scheduled runs."""

from __future__ import annotations

import time

from iris.surfaces.chat.runner import ChatSurface
from iris.surfaces.scheduler import Scheduler


def scheduler_for(surface: ChatSurface, later: float) -> Scheduler:
    """The surface's scheduler, its clock ``later`` seconds ahead of now."""
    runtime = surface.runtime
    assert runtime.schedules is not None
    scheduler = Scheduler(
        runtime.schedules,
        runtime.config.schedules,
        {name: surface for name in surface.run_targets},
        clock=lambda: time.time() + later,
    )
    scheduler.started_at = time.time()  # it ran all along: no run is a missed one
    return scheduler

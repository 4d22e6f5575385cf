"""Background responses as the API tests drive them: the request body and a wait on a run's state."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.api.openresponses import valid_event


def until(check: Callable[[], Any], what: str, within: float = 5.0) -> Any:
    """Poll ``check`` (a GET, as a client polls) until it returns something truthy."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def payload(event: Any) -> dict[str, Any]:
    data: dict[str, Any] = event.to_dict(exclude_unset=False)
    valid_event(data)
    return data

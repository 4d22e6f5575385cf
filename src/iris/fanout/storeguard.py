"""What a failing frame log looks like above it: ``StoreUnavailable``, whatever the backend.

The hub and the subscriptions call the log synchronously; a locked, read-only or vanished
database raises ``sqlite3`` errors there. The iris socket answers those with an ``error``
frame (``store_unavailable``) instead of dropping the device, so it must see one type.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Generator

from iris.errors import StoreUnavailable


@contextlib.contextmanager
def store_errors() -> Generator[None]:
    """Re-raise a store failure inside the block as ``StoreUnavailable``."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"the chat's store is unavailable ({exc}); try again") from exc

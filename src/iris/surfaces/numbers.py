"""Strict numbers for query and body parameters (finding 5 of the second hardening pass).

Python's ``int()`` accepts ``" 5"``, ``"1_0"``, ``"+5"`` and other scripts' digits (``"٥"``),
and any size: a huge ``starting_after`` became an invalid Redis stream id (a traceback and a cut
200). A number given as text is ASCII digits only, at most ``MAX_DIGITS`` of them; a JSON number
is an integer (never a boolean) within its bounds. Each surface turns a refusal into its own
error naming the parameter (a 400 on HTTP).
"""

from __future__ import annotations

import re

MAX_DIGITS = 40  # longer text is refused before int() reads it
# Larger than any sequence a run or a chat reaches, and a valid Redis stream id part.
MAX_SEQUENCE = 2**53
INT64 = (-(2**63), 2**63 - 1)

_DIGITS = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")


def ascii_count(text: str) -> int | None:
    """``text`` as a whole number when it is 1 to ``MAX_DIGITS`` ASCII digits, else None."""
    return int(text) if _DIGITS.fullmatch(text) else None


def bounded_int(value: object, low: int, high: int) -> int | None:
    """``value`` when it is a JSON integer (not a boolean) from ``low`` to ``high``, else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value

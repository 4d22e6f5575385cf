"""Lone UTF-16 surrogates: repaired to U+FFFD before text reaches any surface or provider.

JSON may carry ``"\\ud800"``; Python decodes it into a ``str`` that cannot be encoded as UTF-8,
so the first surface that writes it (a socket frame, an SSE chunk, the upstream request) fails.
A pair split across two deltas is joined, not replaced (``SurrogateMender``).
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
_HIGH = range(0xD800, 0xDC00)


def clean(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (pairs become their character)."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_value(value: Any) -> Any:
    """Every string inside a JSON-like value (a chat message and its content parts) cleaned."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {key: clean_value(item) for key, item in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [clean_value(item) for item in value]  # pyright: ignore[reportUnknownVariableType]
    return value


class SurrogateMender:
    """Cleans a stream of deltas: a high surrogate at the end of one delta waits for the low
    one that may start the next."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, text: str) -> str:
        if not self._held and text.isascii():  # most deltas: nothing to mend (O(1) check)
            return text
        text, self._held = self._held + text, ""
        if text and ord(text[-1]) in _HIGH:
            text, self._held = text[:-1], text[-1]
        return clean(text)

    def flush(self) -> str:
        held, self._held = self._held, ""
        return clean(held)

"""Grapheme boundaries, so a reveal never shows half an emoji or a letter without its accent.

A compact approximation of Unicode's extended grapheme clusters that covers what chat text
holds: combining marks, variation selectors, skin-tone modifiers, ZWJ sequences, keycaps, tag
sequences (flags of regions), regional-indicator pairs and CRLF.
"""

from __future__ import annotations

import unicodedata

_ZWJ = "\u200d"


def _extends(char: str) -> bool:
    """True if ``char`` attaches to the character before it."""
    code = ord(char)
    return (
        unicodedata.combining(char) != 0
        or unicodedata.category(char) in ("Mn", "Me", "Mc")
        or 0xFE00 <= code <= 0xFE0F  # variation selectors
        or 0x1F3FB <= code <= 0x1F3FF  # skin tones
        or 0xE0020 <= code <= 0xE007F  # tags
        or code == 0x20E3  # keycap
        or char == _ZWJ
    )


def _regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def is_boundary(text: str, i: int) -> bool:
    """May ``text`` be cut before index ``i``?"""
    if i <= 0 or i >= len(text):
        return True
    before, char = text[i - 1], text[i]
    if before == "\r" and char == "\n":
        return False
    if _extends(char) or before == _ZWJ:
        return False
    if _regional(before) and _regional(char):
        # Flags pair up from the start of the run: cut only after an even count.
        run = 0
        j = i - 1
        while j >= 0 and _regional(text[j]):
            run += 1
            j -= 1
        return run % 2 == 0
    return True


def boundary_at_or_after(text: str, i: int) -> int:
    while not is_boundary(text, i):
        i += 1
    return i


def boundary_at_or_before(text: str, i: int) -> int:
    while not is_boundary(text, i):
        i -= 1
    return i

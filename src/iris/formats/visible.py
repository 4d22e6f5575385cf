"""What a person approves is what the shell reads: a text with its invisible characters shown.

A command can hide what it does from the person asked to approve it: ``echo ok \\u200b# ;
touch X`` looks like ``echo ok`` and a comment, but the shell reads the zero-width space as
part of a word, so ``#`` starts no comment and ``touch X`` runs. The same trick works with a
no-break space, a bidi override that reorders what is drawn, a carriage return or backspaces
that make a terminal overwrite what it showed.

``shown(text)`` draws every such character as ``⟨U+XXXX⟩`` (its code point): control
characters (but a line break and a tab, which look like what they are), format characters
(zero-width, bidi controls, soft hyphen, tags), line and paragraph separators, every space
but U+0020, lone surrogates, and the characters Unicode calls default-ignorable or that fonts
draw blank (Hangul fillers, variation selectors, the braille blank). ``⟨`` itself is drawn as
``⟨U+27E8⟩``, so ``⟨`` always starts a marker and ``read_back(shown(text)) == text`` for
every text. ``warning(text)`` is the line a surface shows above it when something was hidden
("" when nothing was). ``CUT`` marks where a long command is split between two messages: it
cannot occur in a shown text.

The twin of ``src/iris/web/js/visible.js`` (``tests/webjs/cases/visible.json`` holds both to
the same cases).
"""

from __future__ import annotations

import re
import unicodedata

OPEN, CLOSE = "⟨", "⟩"
CUT = "⟨cut⟩"  # where a text split over several messages was cut (never in a shown text)

# Categories drawn as a marker: control, format, surrogate, line and paragraph separators and
# every space but U+0020 (Zs); a line break and a tab are drawn as what they are.
_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp", "Zs"}
_AS_IS = {"\n", "\t", " "}
# Default-ignorable or drawn blank, though not in those categories (Unicode's
# DerivedCoreProperties; fonts draw these as nothing).
_BLANK = (
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x115F, 0x1160),  # Hangul choseong / jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian variation selectors
    (0x2800, 0x2800),  # braille pattern blank
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xE0000, 0xE0FFF),  # tags and variation selectors supplement
)
_MARKER = re.compile(r"⟨U\+([0-9A-F]{4,6})⟩")


def hidden(char: str) -> bool:
    """Is ``char`` one a person could not see (or that changes how others are drawn)?"""
    if char in _AS_IS:
        return False
    point = ord(char)
    if any(low <= point <= high for low, high in _BLANK):
        return True
    return unicodedata.category(char) in _CATEGORIES


def marker(char: str) -> str:
    return f"{OPEN}U+{ord(char):04X}{CLOSE}"


def shown(text: str) -> str:
    """``text`` with every hidden character (and ``⟨``) drawn as ``⟨U+XXXX⟩``."""
    return "".join(marker(c) if c == OPEN or hidden(c) else c for c in text)


def read_back(text: str) -> str:
    """The text ``shown`` drew: each ``⟨U+XXXX⟩`` is its character again."""
    return _MARKER.sub(lambda m: chr(int(m.group(1), 16)), text)


def count(text: str) -> int:
    """How many of ``text``'s characters are hidden ones."""
    return sum(1 for c in text if hidden(c))


def warning(text: str) -> str:
    """The line shown above ``text`` when it holds hidden characters; "" when it does not."""
    n = count(text)
    if not n:
        return ""
    what = "character" if n == 1 else "characters"
    return f"⚠ Holds {n} hidden or control {what}, shown as ⟨U+…⟩."

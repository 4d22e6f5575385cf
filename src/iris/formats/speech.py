"""Text to be spoken: Markdown taken out as the text streams, never in the middle of a word. Pure.

A voice assistant reads ``content`` aloud: ``**Done!**`` or ``- Kitchen light: `on``` would be
read with its marks. ``Speech`` takes the model's deltas and gives back text without them,
only ever up to the end of the last whole word (the rest waits for the next delta or ``end``),
so a mark split across deltas (``*`` then ``*Done``) is seen whole, and no word reaches a
speaker in two halves.

Word by word: emphasis, strike and code marks around a word (``**``, ``__``, ``*``, ``_``,
``~~``, backticks) go; a link ``[text](url)`` keeps its text; at the start of a line a heading,
bullet or quote mark, a table's pipes, a code fence or a rule goes with its spaces. Words inside
a word (``light.kitchen_light``) keep their underscores.
"""

from __future__ import annotations

import re

_SPACE = re.compile(r"(\s+)")
_LEAD = re.compile(r"^[*_~`\[]+")
_TRAIL = re.compile(r"[*_~`]+(?=[^\w]*$)")
_LINK_TAIL = re.compile(r"\]\([^)\s]*\)?")
_LINE_MARK = re.compile(r"^(#{1,6}|[-*+>]|\||-{3,}|\*{3,}|_{3,}|```\S*|~~~\S*)$")
_PIPE = re.compile(r"^\|+|\|+$")


class Speech:
    def __init__(self) -> None:
        self._held = ""  # from the last whitespace on: a word (or a run of spaces) not yet whole
        self._line_start = True
        self._dropping = False  # the spaces after a dropped line mark go with it

    def feed(self, delta: str) -> str:
        """What of the text so far can be spoken now."""
        text = self._held + delta
        cut = _last_space_start(text)
        self._held = text[cut:]
        return self._clean(text[:cut])

    def end(self) -> str:
        """The rest, at the end of the text."""
        text, self._held = self._held, ""
        return self._clean(text)

    def _clean(self, text: str) -> str:
        out: list[str] = []
        for part in _SPACE.split(text):
            if not part:
                continue
            if part.isspace():
                out.append(self._space(part))
            else:
                out.append(self._word(part))
        return "".join(out)

    def _space(self, space: str) -> str:
        newline = "\n" in space
        if self._dropping and not newline:
            return ""
        self._dropping = False
        if newline:
            self._line_start = True
            return "\n" * min(space.count("\n"), 2)
        return space

    def _word(self, word: str) -> str:
        first, self._line_start = self._line_start, False
        if (first and _LINE_MARK.match(word)) or set(word) == {"|"}:
            self._dropping = True
            self._line_start = first  # "- **Kitchen**": the bullet's word is the line's first
            return ""
        self._dropping = False
        if word.startswith("|") or word.endswith("|"):
            word = _PIPE.sub("", word)
        word = _LINK_TAIL.sub("", word)
        word = _TRAIL.sub("", _LEAD.sub("", word))
        return word.replace("`", "").replace("**", "").replace("~~", "")


def _last_space_start(text: str) -> int:
    """Where the last run of whitespace begins (0: none yet): what is before it is whole
    words, and the run itself may go on in the next delta."""
    index = len(text)
    while index and not text[index - 1].isspace():
        index -= 1
    while index and text[index - 1].isspace():
        index -= 1
    return index


def spoken(text: str) -> str:
    """A whole text as it is spoken."""
    speech = Speech()
    return (speech.feed(text) + speech.end()).strip()

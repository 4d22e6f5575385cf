"""Separates reasoning blocks (``<think>``, ``<thinking>``, ``<reasoning>``) from visible text.

Streaming-safe: a tag split across deltas (``"<thi"`` + ``"nk>"``) is held back until it is
known to be a tag or not, so no tag fragment ever reaches a consumer. For any chunking of a
text, the visible output equals ``scrub(text)``.
"""

from __future__ import annotations

import re

_NAMES = ("think", "thinking", "reasoning")
_OPENERS = tuple(f"<{name}>" for name in _NAMES)
_CLOSER_OF = {f"<{name}>": f"</{name}>" for name in _NAMES}
_BLOCK = re.compile(r"<(think|thinking|reasoning)>(.*?)(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)


class ThinkScrubber:
    def __init__(self) -> None:
        self._pending = ""
        self._closer: str | None = None  # set while inside a block

    def feed(self, chunk: str) -> tuple[str, str]:
        """Feed raw content; return the (visible, reasoning) text that is now certain."""
        if self._closer is None and not self._pending and "<" not in chunk:
            return chunk, ""  # most deltas: no tag begins here
        text = self._pending + chunk
        self._pending = ""
        visible: list[str] = []
        reasoning: list[str] = []
        while text:
            lower = text.lower()
            if self._closer is None:
                hits = [(lower.find(tag), tag) for tag in _OPENERS]
                found = [(i, tag) for i, tag in hits if i >= 0]
                if found:
                    i, tag = min(found)
                    visible.append(text[:i])
                    self._closer = _CLOSER_OF[tag]
                    text = text[i + len(tag) :]
                    continue
                keep = _partial_suffix(lower, _OPENERS)
                visible.append(text[: len(text) - keep])
                self._pending = text[len(text) - keep :]
                break
            i = lower.find(self._closer)
            if i >= 0:
                reasoning.append(text[:i])
                text = text[i + len(self._closer) :]
                self._closer = None
                continue
            keep = _partial_suffix(lower, (self._closer,))
            reasoning.append(text[: len(text) - keep])
            self._pending = text[len(text) - keep :]
            break
        return "".join(visible), "".join(reasoning)

    def flush(self) -> tuple[str, str]:
        """End of content: a held-back fragment that never became a tag is literal text; an
        unclosed block is reasoning."""
        pending, self._pending = self._pending, ""
        if self._closer is None:
            return pending, ""
        return "", pending


def _partial_suffix(lower: str, tags: tuple[str, ...]) -> int:
    """Length of the longest suffix of ``lower`` that is a proper prefix of one of ``tags``."""
    start = lower.rfind("<")
    if start < 0:
        return 0
    tail = lower[start:]
    if any(tag.startswith(tail) and tag != tail for tag in tags):
        return len(tail)
    return 0


def scrub(text: str) -> str:
    """The visible part of a whole text: every reasoning block removed."""
    return _BLOCK.sub("", text)


def finalize(text: str) -> str:
    """Post-process a segment's text for its final delivery: reasoning blocks removed and
    surrounding whitespace trimmed. A streamed preview differs from it only by these."""
    return scrub(text).strip()

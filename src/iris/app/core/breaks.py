"""Newlines as hard breaks, applied so that the transform of a prefix is a prefix of the whole.

Chat text uses single newlines as line breaks; Markdown folds them into spaces. Appending two
spaces to a line makes it a hard break, but only a *complete* line may be changed: the last line
of a streaming prefix is still growing, and touching it would break the pure-append diff the
incremental parser relies on. Lines inside fenced code are left alone (trailing spaces there
would become code).
"""

from __future__ import annotations

from iris.formats.fences import Fence, after_line


class HardBreaks:
    """Streams text through the transform: ``feed(chunk)`` returns the output delta.

    Output so far = transformed complete lines + the raw incomplete last line, so every output
    is an extension of the previous one."""

    def __init__(self) -> None:
        self._partial = ""  # the incomplete last line, already emitted raw
        self._fence: Fence | None = None  # the code block open before the next line

    def feed(self, chunk: str) -> str:
        out: list[str] = []
        text = self._partial + chunk
        emitted = len(self._partial)  # chars of `text` already in the output
        start = 0
        while (end := text.find("\n", start)) != -1:
            line = text[start:end]
            done = line + self._suffix(line) + "\n"
            # The first `emitted` chars were sent raw; send only what extends them.
            out.append(done[emitted:] if emitted else done)
            emitted = 0
            start = end + 1
        rest = text[start:]
        out.append(rest[emitted:] if emitted else rest)
        self._partial = rest
        return "".join(out)

    def _suffix(self, line: str) -> str:
        inside = self._fence is not None
        self._fence = after_line(self._fence, line)
        if inside or self._fence is not None:
            return ""  # a fence line, or code
        if not line.strip() or line.endswith(("  ", "\\")):
            return ""
        return "  "


def hard_breaks(text: str) -> str:
    """The whole-text form of :class:`HardBreaks`."""
    return HardBreaks().feed(text)

"""The text of one segment as a client has seen it, and what of a replay is new.

A ``StreamReset`` (retry or fallback) restarts a segment whose text the client may already have
concatenated; an SSE client cannot take text back. So after a reset the replayed text is held
back while it repeats what was sent, and only what is new goes out. A replay that diverges is
sent whole after a blank line: the client then sees both attempts rather than a spliced one.
"""

from __future__ import annotations


class SegmentText:
    def __init__(self) -> None:
        # Parts, joined only when needed: appending to one growing str copies it every time.
        self._parts: list[str] = []
        self._replay: str | None = None

    @property
    def sent(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def reset(self) -> None:
        self._replay = "" if self.sent else None

    def feed(self, delta: str) -> str:
        """Take a model delta; return the text to send (maybe empty)."""
        if self._replay is None:
            if delta:
                self._parts.append(delta)
            return delta
        self._replay += delta
        sent = self.sent
        if sent.startswith(self._replay):
            return ""
        new = self._replay[len(sent) :] if self._replay.startswith(sent) else "\n\n" + self._replay
        self._parts.append(new)
        self._replay = None
        return new

    def tail(self, final: str) -> str:
        """What of the segment's final text the client has not been sent (held-back text, or
        a segment that was not streamed at all)."""
        sent = self.sent
        if self._replay is None and final.startswith(sent):
            return final[len(sent) :]
        return ""

    def close(self, final: str) -> str:
        """End the segment; return the text it stands for (``final`` when the agent gave one)."""
        text = final or self.sent
        self._parts = []
        self._replay = None
        return text

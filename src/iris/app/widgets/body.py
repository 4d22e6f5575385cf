"""A bubble's Markdown body: settled blocks drawn once, one tail widget repainted per frame.

The core's :class:`MarkdownFeed` decides what is settled; this widget hands settled blocks to
:class:`SettledLines` (rendered once, left alone) and the tail's source — healed (an open
``**bold`` closed, as the browser's tail is: :mod:`iris.app.core.heal`) and with the cursor after
its last text while streaming — to :class:`TailLines`. Both render lazily at paint
time, so however many frames arrive between two ticks the tail is drawn once.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical

from iris.app.core.cursor import with_cursor
from iris.app.core.heal import heal
from iris.app.core.mdstream import MarkdownFeed
from iris.app.widgets.lines import SettledLines, TailLines


class MarkdownBody(Vertical):
    DEFAULT_CSS = "MarkdownBody { height: auto; }"

    def __init__(self) -> None:
        super().__init__()
        self._feed = MarkdownFeed()
        self.settled = SettledLines()
        self.tail = TailLines()
        self._shown: tuple[str, bool] | None = None

    def compose(self) -> ComposeResult:
        yield self.settled
        yield self.tail

    @property
    def tail_paints(self) -> int:
        return self.tail.paints

    @property
    def idle(self) -> bool:
        """Kept for callers that wait on painting; drawing here is synchronous."""
        return True

    def tokens(self) -> list[object]:
        """Every token on screen, settled then tail (for tests)."""
        settled = [token for block in self._feed.splitter.settled for token in block.tokens]
        return [*settled, *self._feed.splitter.tail_tokens]

    def show(self, text: str, streaming: bool) -> None:
        step = self._feed.show(text)
        if step.reseeded:
            self.settled.clear()
        if step.settled:
            self.settled.add(step.settled)
        wanted = (self._feed.splitter.tail, streaming)
        if wanted == self._shown and not step.settled and not step.reseeded:
            return
        self._shown = wanted
        tail = self._feed.splitter.tail
        if streaming:
            # Nothing revealed yet: a lone cursor says the reply is on its way. Healing ends
            # with the tail's last line, so the parse's line numbers still place the cursor.
            tail = with_cursor(heal(tail), self._feed.splitter.tail_tokens)
        self.tail.set_source(tail, gap=bool(self.settled.blocks))

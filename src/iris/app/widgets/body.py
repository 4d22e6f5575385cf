"""A bubble's Markdown body: settled blocks drawn once, one tail widget repainted per frame.

The core's :class:`MarkdownFeed` decides what is settled; this widget only mounts a
``Markdown`` per settled block (never touched again) and repaints the tail, coalescing so at
most one tail update is in flight — a slow paint skips to the newest tail instead of queueing.
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from textual.await_complete import AwaitComplete
from textual.containers import Vertical
from textual.widgets import Markdown

from iris.app.core.cursor import cursor_plugin
from iris.app.core.mdstream import MarkdownFeed, make_parser


def _cursor_parser() -> MarkdownIt:
    return make_parser().use(cursor_plugin)


class SettledBlock(Markdown):
    """One settled top-level block."""


class TailBlock(Markdown):
    """The unstable tail; carries the cursor while the bubble streams."""


class MarkdownBody(Vertical):
    DEFAULT_CSS = """
    MarkdownBody { height: auto; }
    MarkdownBody > Markdown { padding: 0; margin: 0; }
    MarkdownBody > TailBlock > MarkdownBlock:last-child { margin-bottom: 0; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._feed = MarkdownFeed()
        self._tail = TailBlock(parser_factory=_cursor_parser)
        self._cursor = True
        self._painting: AwaitComplete | None = None
        self._wanted: tuple[str, bool] | None = None  # the newest tail not yet painted
        self._painted: tuple[str, bool] = ("", True)
        self.settled_count = 0
        self.tail_paints = 0

    def compose(self):  # noqa: ANN201 - Textual's ComposeResult
        yield self._tail

    def show(self, text: str, streaming: bool) -> None:
        step = self._feed.show(text)
        if step.reseeded:
            for block in self.query(SettledBlock):
                block.remove()
            self.settled_count = 0
        if step.settled:
            blocks = [SettledBlock(block.source) for block in step.settled]
            self.mount_all(blocks, before=self._tail)
            self.settled_count += len(blocks)
        self._wanted = (self._feed.splitter.tail, streaming)
        self._paint()

    @property
    def tail_source(self) -> str:
        return self._feed.splitter.tail

    def _paint(self) -> None:
        if self._painting is not None and not self._painting.is_done:
            return  # the finished paint calls back for the newest tail
        wanted = self._wanted
        if wanted is None or wanted == self._painted:
            return
        source, streaming = wanted
        if streaming != self._cursor:
            self._cursor = streaming
            self._tail._parser_factory = _cursor_parser if streaming else make_parser
        self._painted = wanted
        self.tail_paints += 1
        self._painting = self._tail.update(source)
        self._painting._future.add_done_callback(lambda _: self.call_later(self._paint))

    @property
    def idle(self) -> bool:
        """Everything asked for is on screen."""
        done = self._painting is None or self._painting.is_done
        return done and self._wanted in (None, self._painted)

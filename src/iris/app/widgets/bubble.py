"""One message bubble: reasoning above, the Markdown body, its tool cards, then the footer.

A thin view over a :class:`Bubble` from the store: ``sync`` compares versions and touches only
what changed. While the bubble streams the body shows a cursor; once the reveal caught up it
switches to the static branch (no cursor, the footer and the HTML card appear).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from iris.app.core.view import Bubble
from iris.app.settings import ToolDetail
from iris.app.widgets.artifact_card import ArtifactCard
from iris.app.widgets.body import MarkdownBody
from iris.app.widgets.reasoning_block import ReasoningBlock
from iris.app.widgets.toolcard import ToolCard


def footer_text(bubble: Bubble) -> str:
    parts: list[str] = []
    if bubble.model:
        parts.append(bubble.model)
    if bubble.tokens is not None:
        parts.append(f"{bubble.tokens} tokens")
    return " · ".join(parts)


class MessageBubble(Vertical):
    DEFAULT_CSS = """
    MessageBubble {
        height: auto; margin: 0 1 1 1; padding: 0 1;
        border-left: thick $accent; background: $surface;
    }
    MessageBubble.user { border-left: thick $success; background: $boost; }
    MessageBubble.commentary {
        border-left: thick $panel; background: transparent; color: $text-muted;
        text-opacity: 70%; margin: 0 4 1 3;
    }
    MessageBubble.commentary MarkdownBody { color: $text-muted; }
    MessageBubble.error { border-left: thick $error; color: $text-error; }
    MessageBubble.tools { border-left: thick $panel; background: transparent; }
    MessageBubble.hidden { display: none; }
    MessageBubble .footer { color: $text-muted; text-style: italic; }
    MessageBubble #tools { height: auto; }
    """

    def __init__(self, bubble: Bubble, detail: ToolDetail) -> None:
        super().__init__(classes=bubble.role)
        self.bubble = bubble
        self.message_id = bubble.message_id
        self.detail: ToolDetail = detail
        self.seen_version = -1
        self.streaming = bubble.streaming
        self.body = MarkdownBody()
        self._tools = Vertical(id="tools")
        self._footer = Static("", classes="footer", markup=False)
        self._reasoning: ReasoningBlock | None = None
        self._artifact: ArtifactCard | None = None

    def compose(self) -> ComposeResult:
        yield self.body
        yield self._tools
        yield self._footer

    def on_mount(self) -> None:
        self.sync(self.bubble, self.detail, 0)

    def sync(self, bubble: Bubble, detail: ToolDetail, frame: int) -> None:
        """Bring the view up to the bubble's current state."""
        self.bubble = bubble
        running = any(call.ok is None for call in bubble.tools)
        if bubble.version == self.seen_version and detail == self.detail and not running:
            return
        self.seen_version = bubble.version
        self.streaming = bubble.streaming
        self.set_classes([bubble.role, bubble.kind])
        only_tools = bubble.kind == "tools" or not bubble.text
        self.set_class(detail == "nothing" and only_tools and not bubble.streaming, "hidden")
        self.body.display = bool(bubble.text) or bubble.streaming
        self.body.show(bubble.shown, bubble.streaming)
        self._sync_reasoning(bubble)
        self._sync_tools(bubble, detail, frame)
        footer = "" if bubble.kind == "commentary" or bubble.streaming else footer_text(bubble)
        self._footer.update(footer)
        self._footer.display = bool(footer)
        self._sync_artifact(bubble)

    def _sync_reasoning(self, bubble: Bubble) -> None:
        if not bubble.reasoning:
            return
        if self._reasoning is None:
            self._reasoning = ReasoningBlock(bubble.reasoning)
            self.mount(self._reasoning, before=self.body)
        elif self._reasoning.text != bubble.reasoning:
            self._reasoning.set_text(bubble.reasoning)

    def _sync_tools(self, bubble: Bubble, detail: ToolDetail, frame: int) -> None:
        self.detail = detail
        cards = list(self._tools.query(ToolCard))
        for card, call in zip(cards, bubble.tools, strict=False):
            card.set_detail(detail)
            card.update_call(call, frame)
        if len(bubble.tools) > len(cards):
            self._tools.mount_all(ToolCard(call, detail) for call in bubble.tools[len(cards) :])

    def _sync_artifact(self, bubble: Bubble) -> None:
        html = bubble.html
        if html and self._artifact is None:
            self._artifact = ArtifactCard(bubble.message_id, html)
            self.mount(self._artifact)

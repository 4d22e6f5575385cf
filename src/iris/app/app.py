"""IrisApp: the Textual app. It wires the connection, the store and the widgets together.

Frames go straight into the :class:`ChatView`; a 30 Hz frame tick advances the reveals and
syncs the bubble widgets that changed, so the screen repaints at most ~30 times a second
however fast frames arrive.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Input, Static

from iris.app.attach_screen import AttachScreen
from iris.app.client import IrisConnection, Status
from iris.app.core.attach import Attachments
from iris.app.core.view import Bubble, ChatView
from iris.app.settings import Settings, save_settings
from iris.app.settings_screen import SettingsScreen
from iris.app.widgets.approval_panel import ApprovalPanel
from iris.app.widgets.bubble import MessageBubble
from iris.app.widgets.elicitation_panel import ElicitationPanel
from iris.app.widgets.lines import warm_up_highlighting
from iris.app.widgets.typing_indicator import TypingIndicator

FPS = 30
Card = MessageBubble | ApprovalPanel | ElicitationPanel
_STATUS_MARK = {
    "connecting": "◌",
    "connected": "●",
    "reconnecting": "◐",
    "offline": "○",
    "unauthorized": "✗",
}


class IrisApp(App[None]):
    TITLE = "iris"
    AUTO_FOCUS = "#composer"
    CSS = """
    #status { height: auto; padding: 0 1; background: $panel; color: $text-muted; }
    #status.connected { color: $text-success; }
    #status.offline, #status.unauthorized { color: $text-warning; }
    #chat { height: 1fr; padding: 1 0 0 0; scrollbar-gutter: stable; }
    #composer { dock: bottom; margin: 0 1 1 1; }
    #attached { height: auto; margin: 0 1; color: $text-muted; }
    #attached.problem { color: $text-warning; }
    """
    BINDINGS = [
        Binding("f2", "settings", "Settings"),
        Binding("ctrl+o", "settings", "Settings", show=False),
        Binding("f3", "attach", "Attach"),
        Binding("ctrl+t", "attach", "Attach", show=False),
        Binding("f4", "detach", "Clear files", show=False),
        Binding("escape", "cancel_turn", "Stop reply"),
        Binding("ctrl+q", "quit", "Quit"),
    ]

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,  # approval countdowns: expires_at is Unix
        settings_file: Path | None = None,
        retry_min: float = 0.5,
    ) -> None:
        super().__init__()
        self.settings = settings
        self._settings_file = settings_file
        self.store = ChatView(clock, streaming=settings.streaming, smoothness=settings.smoothness)
        self.store.chat_id = settings.chat_id
        self.status = Status("connecting", settings.url)
        self.connection = self._connection(retry_min)
        self._retry_min = retry_min
        self._wall_clock = wall_clock
        self._widgets: dict[str, Card] = {}
        self._epoch = 0
        self._frame = 0
        # Held directly: while Settings is open, queries would search the modal screen.
        self._status = Static("", id="status", markup=False)
        self._chat = VerticalScroll(id="chat")
        self._typing = TypingIndicator()
        self.attachments = Attachments()  # files for the next message
        self._attached = Static("", id="attached", markup=False)
        self._attached.display = False

    def _connection(self, retry_min: float) -> IrisConnection:
        return IrisConnection(
            self.settings.url,
            self.settings.token,
            chat_id=lambda: self.store.chat_id,
            resume_point=lambda: self.store.last_seq,
            on_frame=self._on_frame,
            on_status=self._on_status,
            resync=self.store.take_resync,
            retry_min=retry_min,
        )

    def compose(self) -> ComposeResult:
        yield self._status
        yield self._chat
        yield self._typing
        yield self._attached
        yield Input(
            placeholder="Message iris…  (F2 settings, F3 attach a file, Esc stops the reply)",
            id="composer",
        )
        yield Footer()

    def on_mount(self) -> None:
        self._chat.anchor()
        self._show_status()
        self._link()
        self.set_interval(1 / FPS, self._tick)
        # Textual's workers are the app's task group: every one is cancelled when it closes.
        self.run_worker(warm_up_highlighting, name="warm-up", thread=True, exit_on_error=False)

    def _link(self) -> None:
        """Run the connection; exclusive: a new one (new URL or token) ends the old."""
        self.run_worker(
            self.connection.run(), name="link", group="link", exclusive=True, exit_on_error=False
        )

    # -- from the connection ------------------------------------------------------------------

    def _on_frame(self, frame: dict[str, Any]) -> None:
        if frame.get("type") == "ready":
            self.store.new_connection()
        self.store.apply(frame)
        if frame.get("type") == "ready" and self.store.chat_id != self.settings.chat_id:
            self._save(replace(self.settings, chat_id=self.store.chat_id))

    def _on_status(self, status: Status) -> None:
        self.status = status
        self._show_status()

    def _show_status(self) -> None:
        status = self.status
        widget = self._status
        widget.set_classes(status.state)
        text = f"{_STATUS_MARK.get(status.state, '')} {status.state}"
        if status.detail:
            text += f" — {status.detail}"
        widget.update(text)

    # -- the frame tick -----------------------------------------------------------------------

    def _tick(self) -> None:
        self._frame += 1
        self.store.tick()
        self.sync_view()

    def sync_view(self) -> None:
        """Mount new bubbles and let existing ones catch up with the store."""
        chat = self._chat
        if self.store.epoch != self._epoch:  # a sync replaced the conversation
            self._epoch = self.store.epoch
            chat.remove_children()
            self._widgets = {}
        fresh: list[Card] = []
        for bubble in self.store.bubbles:
            widget = self._widgets.get(bubble.message_id)
            if widget is None or widget.bubble is not bubble:
                widget = self._card(bubble)
                self._widgets[bubble.message_id] = widget
                fresh.append(widget)
            elif widget.is_mounted:
                widget.sync(bubble, self.settings.tool_detail, self._frame // 3)
        if fresh:
            chat.mount_all(fresh)
        self._typing.show(self.store.typing, self._frame)

    def _card(self, bubble: Bubble) -> Card:
        if bubble.approval:
            return ApprovalPanel(bubble, self._wall_clock)
        if bubble.elicitation:
            return ElicitationPanel(bubble)
        return MessageBubble(bubble, self.settings.tool_detail)

    # -- user actions ------------------------------------------------------------------------

    @on(Input.Submitted, "#composer")
    async def _send(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text and not self.attachments.count:
            return
        names = ", ".join(self.attachments.names)
        files = self.attachments.take()
        frame: dict[str, Any] = {"type": "message.send", "text": text}
        if files:
            frame["attachments"] = files
        if self.store.chat_id:
            frame["chat_id"] = self.store.chat_id
        if not await self.connection.send(frame):
            self.attachments.restore(files)
            self.notify("Not connected; the message was not sent.", severity="warning")
            return
        event.input.value = ""
        self._show_attached()
        # As the browser shows it: the files by name under the text.
        attached = f"[attached: {names}]" if names else ""
        self.store.add_local_user("\n".join(part for part in (text, attached) if part))
        self._chat.anchor()  # sending returns you to the bottom
        self.sync_view()

    @on(ApprovalPanel.Decided)
    async def _decided(self, event: ApprovalPanel.Decided) -> None:
        frame = {"type": "approval.respond", "approval_id": event.approval_id}
        if not await self.connection.send({**frame, "decision": event.decision}):
            self.notify("Not connected; the answer was not sent.", severity="warning")
            return
        self.store.answered(event.approval_id, event.decision)
        self.sync_view()

    @on(ElicitationPanel.Answered)
    async def _elicitation_answered(self, event: ElicitationPanel.Answered) -> None:
        frame: dict[str, Any] = {
            "type": "elicitation.respond",
            "elicitation_id": event.elicitation_id,
            "action": event.action,
        }
        if event.content is not None:
            frame["content"] = event.content
        if not await self.connection.send(frame):
            self.notify("Not connected; the answer was not sent.", severity="warning")

    async def action_cancel_turn(self) -> None:
        await self.connection.send({"type": "turn.cancel"})

    def action_attach(self) -> None:
        self.push_screen(AttachScreen(Path.cwd()), self._picked)

    def _picked(self, path: Path | None) -> None:
        if path is not None:
            self.attachments.add(path)
            self._show_attached()
        self.query_one("#composer", Input).focus()

    def action_detach(self) -> None:
        self.attachments.clear()
        self._show_attached()

    def _show_attached(self) -> None:
        """The line above the composer: the files that go with the next message, or why the
        last one could not."""
        names = self.attachments.names
        line = f"📎 {', '.join(names)}  (F4 clears)" if names else ""
        problem = self.attachments.problem
        self._attached.update(
            "\n".join(part for part in (line, problem and f"⚠ {problem}") if part)
        )
        self._attached.set_class(bool(problem), "problem")
        self._attached.display = bool(names or problem)

    def action_settings(self) -> None:
        self.push_screen(SettingsScreen(self.settings, self.apply_settings))

    def apply_settings(self, settings: Settings) -> None:
        """Apply live (speed, streaming, tool detail; a new URL or token reconnects) and save."""
        relink = (settings.url, settings.token) != (self.settings.url, self.settings.token)
        self._save(settings)
        self.store.set_streaming(settings.streaming)
        self.store.set_smoothness(settings.smoothness)
        for widget in self._widgets.values():
            if widget.is_mounted:
                widget.sync(widget.bubble, settings.tool_detail, self._frame // 3)
        if relink:
            self.connection = self._connection(self._retry_min)
            self._link()

    def _save(self, settings: Settings) -> None:
        self.settings = settings
        save_settings(settings, self._settings_file)

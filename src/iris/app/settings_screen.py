"""The Settings screen: Streaming, Streaming speed, Tool detail, server URL and device token.

Every change applies live and is saved at once (the app passes ``on_change``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Switch

from iris.app.settings import TOOL_DETAILS, Settings, ToolDetail

SPEEDS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
_DETAIL_LABELS = {"everything": "Everything", "truncated": "Truncated", "nothing": "Nothing"}


class SettingsScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "dismiss_screen", "Close")]
    DEFAULT_CSS = """
    SettingsScreen { align: center middle; }
    SettingsScreen > VerticalScroll {
        width: 64; height: auto; max-height: 90%; background: $panel; padding: 1 2;
        border: round $accent;
    }
    SettingsScreen Horizontal { height: auto; margin: 0 0 1 0; }
    SettingsScreen Label { padding: 1 1 0 0; width: 18; }
    SettingsScreen Select, SettingsScreen Input { width: 1fr; }
    """

    def __init__(self, settings: Settings, on_change: Callable[[Settings], None]) -> None:
        super().__init__()
        self.settings = settings
        self._on_change = on_change

    def compose(self) -> ComposeResult:
        s = self.settings
        with VerticalScroll():
            with Horizontal():
                yield Label("Streaming")
                yield Switch(value=s.streaming, id="streaming")
            with Horizontal():
                yield Label("Streaming speed")
                yield Select(
                    [(f"{v:.1f} s ({60 / v:.0f} chars/s)", v) for v in SPEEDS],
                    value=min(SPEEDS, key=lambda v: abs(v - s.smoothness)),
                    allow_blank=False,
                    id="speed",
                )
            with Horizontal():
                yield Label("Tool detail")
                yield Select(
                    [(_DETAIL_LABELS[d], d) for d in TOOL_DETAILS],
                    value=s.tool_detail,
                    allow_blank=False,
                    id="tool-detail",
                )
            with Horizontal():
                yield Label("Server URL")
                yield Input(s.url, id="url")
            with Horizontal():
                yield Label("Device token")
                yield Input(s.token, password=True, id="token")
            yield Button("Done", id="done", variant="primary")

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).border_title = "Settings"

    def _change(self, **values: object) -> None:
        self.settings = replace(self.settings, **values)  # type: ignore[arg-type]
        self._on_change(self.settings)

    @on(Switch.Changed, "#streaming")
    def _streaming(self, event: Switch.Changed) -> None:
        self._change(streaming=event.value)

    @on(Select.Changed, "#speed")
    def _speed(self, event: Select.Changed) -> None:
        if isinstance(event.value, float):
            self._change(smoothness=event.value)

    @on(Select.Changed, "#tool-detail")
    def _detail(self, event: Select.Changed) -> None:
        if event.value in TOOL_DETAILS:
            detail: ToolDetail = event.value  # type: ignore[assignment]
            self._change(tool_detail=detail)

    @on(Input.Submitted, "#url")
    @on(Input.Submitted, "#token")
    def _link(self, event: Input.Submitted) -> None:
        field = "url" if event.input.id == "url" else "token"
        self._change(**{field: event.value.strip()})

    @on(Button.Pressed, "#done")
    def action_dismiss_screen(self) -> None:
        # Typed but not yet submitted link fields count too.
        url = self.query_one("#url", Input).value.strip()
        token = self.query_one("#token", Input).value.strip()
        if (url, token) != (self.settings.url, self.settings.token):
            self._change(url=url, token=token)
        self.dismiss(None)

"""Settings: live changes through the Settings screen, and persistence per device (0600)."""

from __future__ import annotations

import argparse
import asyncio
import json
import stat
from pathlib import Path

from textual.widgets import Select, Switch

from iris.app.main import resolve_settings
from iris.app.settings import Settings, load_settings, save_settings, settings_path
from iris.app.settings_screen import SettingsScreen
from iris.app.widgets.toolcard import ToolCard
from tests.fakes.iris_server import FakeIrisServer, full_turn

from .driver import SIZE, bubbles, make_app, screen_text, settled, until


async def choose(pilot, select_id: str, label: str) -> None:  # noqa: ANN001 - Pilot
    """Open a Select with the keyboard and pick the option whose label starts with ``label``."""
    await until(pilot, lambda: pilot.app.screen.query_one(select_id, Select) is not None)
    select = pilot.app.screen.query_one(select_id, Select)
    select.focus()
    await pilot.press("enter")
    options = [str(prompt) for prompt, _ in select._options]
    target = next(i for i, text in enumerate(options) if text.startswith(label))
    current = next(i for i, (_, value) in enumerate(select._options) if value == select.value)
    await pilot.press(*(["down"] * (target - current) or ["up"] * (current - target)), "enter")


async def test_tool_detail_changes_live_and_is_saved(server: FakeIrisServer) -> None:
    server.script(*full_turn())
    app = make_app(server.url, smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: len(bubbles(app)) == 4 and settled(app))
        # Truncated: the one-line summary.
        await until(pilot, lambda: 'terminal: "ls -la"' in screen_text(app))
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, SettingsScreen))
        await choose(pilot, "#tool-detail", "Everything")
        await until(pilot, lambda: app.settings.tool_detail == "everything")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SettingsScreen))
        await until(pilot, lambda: '"command": "ls -la"' in screen_text(app))  # full args
        assert "→ total 12" in screen_text(app)  # output preview
        await pilot.press("f2")
        await choose(pilot, "#tool-detail", "Nothing")
        await pilot.press("escape")
        await until(pilot, lambda: "terminal" not in screen_text(app))
        assert all(not card.display or card.has_class("nothing") for card in app.query(ToolCard))
        assert json.loads(settings_path().read_text())["tool_detail"] == "nothing"


async def test_speed_changes_the_live_reveal(server: FakeIrisServer) -> None:
    release = asyncio.Event()
    server.script(
        {"type": "message.start", "message_id": "m1", "role": "assistant"},
        {"type": "message.update", "message_id": "m1", "text": "slow " * 20},
        release,
    )
    app = make_app(server.url, smoothness=0.8)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: app.store.reveal_rate("m1") is not None)
        assert app.store.reveal_rate("m1") == 75
        await pilot.press("f2")
        await choose(pilot, "#speed", "0.2")
        await until(pilot, lambda: app.settings.smoothness == 0.2)
        assert app.store.reveal_rate("m1") == 300  # the live bubble, at once
        assert load_settings().smoothness == 0.2
        release.set()


async def test_streaming_off_shows_replies_whole(server: FakeIrisServer) -> None:
    release = asyncio.Event()
    server.script(
        {"type": "message.start", "message_id": "m1", "role": "assistant"},
        {"type": "message.update", "message_id": "m1", "text": "partial text"},
        release,
        {"type": "message.stop", "message_id": "m1", "final_text": "partial text, then whole."},
    )
    app = make_app(server.url)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press("f2")
        await until(pilot, lambda: app.screen.query_one("#streaming", Switch) is not None)
        app.screen.query_one("#streaming", Switch).focus()
        await pilot.press("enter")
        await until(pilot, lambda: not app.settings.streaming)
        await pilot.press("escape")
        await pilot.press(*"go", "enter")
        await server.wait_until(lambda: server.seq == 2)
        await pilot.pause()
        assert [b.bubble.text for b in bubbles(app)] == ["go"]  # start/update ignored
        release.set()
        await until(pilot, lambda: len(bubbles(app)) == 2 and settled(app))
        assert bubbles(app)[1].bubble.shown == "partial text, then whole."


def test_settings_file_is_private_and_keeps_the_token(isolated_home: Path) -> None:
    save_settings(Settings(token="secret", smoothness=0.5, tool_detail="everything"))
    path = settings_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = load_settings()
    assert (loaded.token, loaded.smoothness, loaded.tool_detail) == ("secret", 0.5, "everything")


def test_damaged_settings_fall_back_to_defaults(isolated_home: Path) -> None:
    settings_path().parent.mkdir(parents=True, exist_ok=True)
    settings_path().write_text("{not json")
    assert load_settings() == Settings()


def test_flags_win_and_the_device_token_is_remembered(isolated_home: Path) -> None:
    args = argparse.Namespace(url="ws://h:1/iris/ws", token="tok", chat="c9", config=None)
    settings = resolve_settings(args)
    assert (settings.url, settings.token, settings.chat_id) == ("ws://h:1/iris/ws", "tok", "c9")
    again = resolve_settings(argparse.Namespace(url=None, token=None, chat=None, config=None))
    assert again.token == "tok" and again.url == "ws://h:1/iris/ws"
    assert stat.S_IMODE(settings_path().stat().st_mode) == 0o600


def test_token_from_the_servers_config_on_the_same_machine(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("platforms:\n  iris: {enabled: true, tokens: [from-config]}\n")
    args = argparse.Namespace(url=None, token=None, chat=None, config=str(config))
    assert resolve_settings(args).token == "from-config"

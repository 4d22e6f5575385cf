"""Helpers for driving IrisApp under ``run_test()``: wait on conditions, never on sleeps."""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Callable
from pathlib import Path

from textual.css.query import NoMatches
from textual.pilot import Pilot

from iris.app.app import IrisApp
from iris.app.settings import Settings
from iris.app.widgets.bubble import MessageBubble

SIZE = (90, 40)


def make_app(url: str, token: str = "device-token", **settings: object) -> IrisApp:
    return IrisApp(
        Settings(url=url, token=token, **settings),  # type: ignore[arg-type]
        settings_file=Path.home() / ".iris" / "app.json",
        retry_min=0.05,
    )


async def until(pilot: Pilot[None], predicate: Callable[[], bool], within: float = 5.0) -> None:
    """Let the app run until ``predicate()`` holds; fail after ``within`` seconds. A widget
    the predicate queries may not be mounted yet (a card composes its buttons after it is
    itself mounted): that counts as "not yet"."""

    def holds() -> bool:
        try:
            return predicate()
        except NoMatches:
            return False

    async with asyncio.timeout(within):
        while not holds():
            await pilot.pause(0.01)


def bubbles(app: IrisApp) -> list[MessageBubble]:
    return list(app.query(MessageBubble))


def settled(app: IrisApp) -> bool:
    """Every bubble finished revealing and painting."""
    widgets = bubbles(app)
    return bool(widgets) and all(
        not w.streaming and w.body.idle and w.seen_version == w.bubble.version for w in widgets
    )


_TEXT = re.compile(
    r'<text [^>]*clip-path="url\(#terminal-\d+-line-(\d+)\)"[^>]*>(.*?)</text>', re.S
)


def screen_text(app: IrisApp) -> str:
    """What the user sees, as plain lines (from the SVG screenshot)."""
    lines: dict[int, list[str]] = {}
    for number, text in _TEXT.findall(app.export_screenshot()):
        lines.setdefault(int(number), []).append(html.unescape(text).replace("\xa0", " "))
    return "\n".join("".join(lines[n]).rstrip() for n in sorted(lines))

"""SVG snapshots of a finished turn in each Tool detail mode.

Stored under ``tests/app/snapshots/``; run with ``IRIS_UPDATE_SNAPSHOTS=1`` to rewrite them
after an intended change to the look (and look at the SVGs before committing).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from textual.widgets import Input

from iris.app.settings import ToolDetail
from tests.fakes.iris_server import FakeIrisServer, full_turn

from .driver import SIZE, bubbles, make_app, screen_text, settled, until

SNAPSHOTS = Path(__file__).parent / "snapshots"
DOCS_SHOT = Path(__file__).parents[2] / "docs" / "app-turn.svg"


def normalized(svg: str, port: int) -> str:
    """The server's random port and the hash derived from the screen's text vary per run."""
    svg = svg.replace(f":{port}/", ":8642/")
    return re.sub(r"terminal-\d+", "terminal", svg)


ALWAYS = ("summarize the repo", "Found 12 files.", "💭 Reasoning", "fake-model · 42 tokens")


async def finished_turn_svg(server: FakeIrisServer, detail: ToolDetail) -> tuple[str, str]:
    server.script(*full_turn())
    app = make_app(server.url, smoothness=0.2, tool_detail=detail)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"summarize the repo", "enter")
        await until(pilot, lambda: len(bubbles(app)) == 4 and settled(app))
        app.query_one(Input).cursor_blink = False  # a blinking cursor is half the time off
        must_show = [*ALWAYS, *EXPECT[detail]]
        await until(pilot, lambda: all(text in screen_text(app) for text in must_show))
        await pilot.pause()
        svg = app.export_screenshot(title="iris app")
        return normalized(svg, server.port), screen_text(app)


EXPECT = {
    "everything": ['"command": "ls -la"', "→ total 12", "✓ 💻 terminal · 0.4s"],
    "truncated": ['✓ 💻 terminal: "ls -la" · 0.4s'],
    "nothing": [],
}


@pytest.mark.parametrize("detail", ["everything", "truncated", "nothing"])
async def test_finished_turn_snapshot(server: FakeIrisServer, detail: ToolDetail) -> None:
    svg, text = await finished_turn_svg(server, detail)
    for shown in EXPECT[detail]:
        assert shown in text
    if detail != "everything":
        assert '"command"' not in text
    if detail == "nothing":
        assert "terminal" not in text
    for always in ALWAYS:
        assert always in text
    path = SNAPSHOTS / f"turn-{detail}.svg"
    if os.environ.get("IRIS_UPDATE_SNAPSHOTS") or not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(svg)
        if detail == "truncated":
            DOCS_SHOT.write_text(svg)
        if not os.environ.get("IRIS_UPDATE_SNAPSHOTS"):
            pytest.fail(f"wrote the missing snapshot {path.name}; look at it and run again")
    assert svg == path.read_text(), f"the screen differs from {path.name}"

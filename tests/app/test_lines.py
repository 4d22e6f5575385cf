"""A block drawn through Rich's public Markdown renderer, from its source."""

from __future__ import annotations

from rich.console import Console
from rich.style import Style

from iris.app.widgets.lines import render_markdown


def _text(source: str, width: int = 40) -> list[str]:
    console = Console(width=width, color_system=None)
    strips = render_markdown(source, console, width, Style())
    return [strip.text.rstrip() for strip in strips]


def test_a_bare_link_shows_once() -> None:
    # The app's own tokens linkify it; drawn from them, the address showed twice.
    assert _text("see https://example.com now") == ["see https://example.com now"]


def test_blocks_keep_their_shape_and_lose_rich_padding() -> None:
    assert _text("| a | b |\n|---|---|\n| 1 | 2 |") == [" a  b", " ────", " 1  2"]
    assert _text("- one\n- two") == [" • one", " • two"]

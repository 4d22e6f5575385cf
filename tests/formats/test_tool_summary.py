"""The one summary of a tool call's arguments, and each surface showing it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iris.events import ToolStarted
from iris.formats.tool_summary import clip, summarize
from iris.formats.visible import hidden, shown
from iris.protocol.frames import tool_preview
from iris.surfaces.chat.progress import ToolLines
from iris.surfaces.cli.render import tool_label


def test_the_telling_argument_first_then_any_string_then_json() -> None:
    assert summarize({"timeout": 5, "command": "git  status\n"}, 60) == "git status"
    assert summarize({"n": 3, "note": "hello"}, 60) == "hello"
    assert summarize({"n": 3}, 60) == '{"n": 3}'
    assert summarize({}, 60) == ""


def test_every_surface_says_the_same_thing() -> None:
    args = {"timeout": 5, "pattern": "*.py", "extra": "noise"}
    lines = ToolLines("all")
    lines.apply(ToolStarted(index=1, name="grep", args=args))
    assert lines.lines == ["🔧 grep: *.py"]
    assert tool_label("grep", args, verbose=False) == '┊ ⚡ grep: "*.py"'
    assert tool_preview(args) == "*.py"


@given(st.text(), st.integers(1, 100))
def test_a_clip_is_one_line_within_the_limit(text: str, limit: int) -> None:
    clipped = clip(text, limit)
    assert len(clipped) <= limit
    assert "\n" not in clipped
    # A hidden character (a zero-width or no-break space, a control) is drawn, never dropped.
    assert clipped == " ".join(shown(text).split()) or clipped.endswith("…")
    assert not any(hidden(c) for c in clipped)

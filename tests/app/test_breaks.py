"""Newlines as hard breaks: the transform of a prefix is a prefix of the transform of the whole."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from iris.app.core.breaks import HardBreaks, hard_breaks
from iris.app.core.mdstream import make_parser

LINES = st.sampled_from(
    [
        "line one",
        "",
        "```",
        "```python",
        "~~~",
        "code  x",
        "- item",
        "1. first",
        "| a | b |",
        "|---|---|",
        "# Title",
        "trailing\\",
        "two  ",
        "> quote",
        "` ``` `",
        "é👍🏽",
    ]
)
TEXTS = st.lists(LINES, max_size=25).map("\n".join)
# The reader: the app's parser, and the same parser told that every newline is a line break.
READER = make_parser()
BREAKS = MarkdownIt("gfm-like", {"breaks": True})


@given(TEXTS, st.data())
def test_transform_of_a_prefix_is_a_prefix_of_the_whole(text: str, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(text)))
    assert hard_breaks(text).startswith(hard_breaks(text[:cut]))


@given(TEXTS, st.lists(st.integers(1, 12), max_size=60))
def test_streaming_in_chunks_equals_the_whole(text: str, sizes: list[int]) -> None:
    breaks, out, at = HardBreaks(), [], 0
    for size in sizes:
        out.append(breaks.feed(text[at : at + size]))
        at += size
    out.append(breaks.feed(text[at:]))
    assert "".join(out) == hard_breaks(text)


def test_single_newlines_become_line_breaks_but_code_is_untouched() -> None:
    html = make_parser().render(hard_breaks("roses\nviolets\n\n```\na\nb\n```\n"))
    assert "roses<br />\nviolets" in html
    assert "<code>a\nb\n</code>" in html


def test_the_incomplete_last_line_is_left_raw() -> None:
    assert hard_breaks("one\ntwo") == "one  \ntwo"


@given(TEXTS)
def test_the_parser_reads_the_transform_as_newlines_made_line_breaks(text: str) -> None:
    # Indented code (four spaces after a blank line) is not in the alphabet: only fenced code
    # is known to the transform, and models write fences.
    assert READER.render(hard_breaks(text)) == BREAKS.render(text)

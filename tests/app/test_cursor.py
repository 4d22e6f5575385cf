"""The streaming cursor goes after the tail's last text, in the source handed to the renderer."""

from __future__ import annotations

import pytest

from iris.app.core.cursor import CURSOR, with_cursor
from iris.app.core.mdstream import make_parser


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("", CURSOR),
        ("Hello **world**", "Hello **world**▉"),
        ("one  \ntwo  \nthr", "one  \ntwo  \nthr▉"),
        ("- a\n- b\n", "- a\n- b▉\n"),
        ("> q\n> r", "> q\n> r▉"),
        ("Title\n---", "Title▉\n---"),  # the underline keeps the heading a heading
        ("para\n\n---\n", "para▉\n\n---\n"),
        ("x\n\n```py\ncode", "x\n\n```py\ncode"),  # in code the cursor would read as code
        ("| a | b |\n|---|---|\n| 1 | 2 |", "| a | b |\n|---|---|\n| 1 | 2 |"),
    ],
)
def test_the_cursor_follows_the_last_text(source: str, shown: str) -> None:
    assert with_cursor(source, make_parser().parse(source)) == shown

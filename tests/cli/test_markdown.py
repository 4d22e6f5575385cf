"""Markdown a line at a time: what each finished line looks like, given the lines before it."""

from __future__ import annotations

from iris.surfaces.cli.markdown import MarkdownLines, Piece


def text_of(pieces: list[Piece]) -> str:
    return "".join(text for _, text in pieces)


def style_of(pieces: list[Piece], needle: str) -> str:
    return next(style for style, text in pieces if needle in text)


def test_block_lines() -> None:
    md = MarkdownLines(width=20)
    heading = md.line("## Install **now**")
    assert text_of(heading) == "Install now"
    assert style_of(heading, "now") == "class:md.heading class:md.strong"
    assert text_of(md.line("  - nested item")) == "  • nested item"
    assert text_of(md.line("3) third")) == "3) third"
    assert md.line("> quoted")[0] == ("class:md.quote", "▌ ")
    assert md.line("***") == [("class:md.rule", "─" * 20)]


def test_inline_spans_follow_commonmark() -> None:
    md = MarkdownLines()
    line = md.line(r"a *em* `co*de*` \*literal\* ~~gone~~ [docs](https://d.example)")
    assert style_of(line, "em") == "class:md.em"
    assert style_of(line, "co*de*") == "class:md.code"  # no emphasis inside a code span
    assert "*literal*" in text_of(line)
    assert style_of(line, "gone") == "class:md.strike"
    assert text_of(line).endswith("docs (https://d.example)")
    autolink = md.line("<https://d.example>")
    assert text_of(autolink) == "https://d.example"  # the target is not repeated


def test_code_fences_hold_their_lines_as_written_and_colour_known_languages() -> None:
    md = MarkdownLines()
    assert md.line("```python") == [("class:md.fence", "```python")]
    code = md.line("def f(): return '# not a heading'")
    assert style_of(code, "def") == "class:pygments.keyword"
    assert text_of(code) == "def f(): return '# not a heading'"
    still_code = md.line("~~~")  # only a backtick fence closes it
    assert text_of(still_code) == "~~~" and "md.fence" not in still_code[0][0]
    assert md.line("```") == [("class:md.fence", "```")]
    assert md.line("# Title") == [("class:md.heading", "Title")]  # outside again
    md.line("~~~unknown-language")
    assert md.line("**as is**") == [("class:md.code", "**as is**")]


def test_an_inline_code_span_is_not_a_fence() -> None:
    md = MarkdownLines()
    md.line("``` `x` ```")
    assert md.line("# Title") == [("class:md.heading", "Title")]


def test_a_preview_of_the_unfinished_line_never_changes_the_state() -> None:
    md = MarkdownLines()
    assert md.partial("```py") == [("class:md.fence", "```py")]
    assert md.line("# Title") == [("class:md.heading", "Title")]  # no fence was opened
    md.line("```")
    assert md.partial("x = 1")[0][0].startswith("class:")
    md.partial("```")
    assert md.line("still code") == [("class:md.code", "still code")]


def test_table_rows_are_drawn_one_at_a_time() -> None:
    md = MarkdownLines()
    assert text_of(md.line("| name | **size** |")) == "│ name │ size │"
    assert md.line("|------|:----:|") == [("class:md.rule", "├──────┼──────┤")]
    assert text_of(md.line(r"| a\|b | 2 |")) == r"│ a|b │ 2 │"

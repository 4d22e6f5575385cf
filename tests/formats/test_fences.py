"""The one fenced-code scanner: it finds the blocks a CommonMark parser finds."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from iris.formats.fences import after_line, code_blocks, fence_after, opens


def test_a_fence_opens_with_its_info_and_closes_on_a_long_enough_marker() -> None:
    fence = opens("  ```python title=x")
    assert fence is not None
    assert (fence.line, fence.marker, fence.language) == ("```python title=x", "```", "python")
    assert after_line(fence, "``") is fence
    assert after_line(fence, "~~~") is fence
    assert after_line(fence, "``` x") is fence
    assert after_line(fence, "````") is None


def test_what_is_not_a_fence() -> None:
    for line in ("``", "    ```", "``` `code` ```", "\t```", "a ```"):
        assert opens(line) is None, line
    assert opens("~~~ `ok`") is not None  # only a backtick fence forbids backticks in its info


def test_only_complete_lines_count() -> None:
    assert fence_after("```py") is None
    fence = fence_after("```py\n")
    assert fence is not None
    assert fence_after("x\n```", fence) is fence
    assert fence_after("x\n```\n", fence) is None


def test_code_blocks_yields_closed_blocks_with_their_code() -> None:
    text = "a\n~~~~ html\n<p>\n```\n</p>\n~~~~\n```sh\nls\n```\n```open\nnever"
    blocks = [(b.fence.language, b.code) for b in code_blocks(text)]
    assert blocks == [("html", "<p>\n```\n</p>\n"), ("sh", "ls\n")]


LINES = st.sampled_from(
    ["text", "", "```", "```py", "~~~", "~~~~", "````", "``` `x`", "  ```js", "    ```", "# h"]
)


@given(st.lists(LINES, max_size=20).map("\n".join))
def test_the_blocks_are_those_markdown_it_reads(text: str) -> None:
    assume(fence_after(text + "\n") is None)  # markdown-it runs an unclosed block to the end
    tokens = [t for t in MarkdownIt("commonmark").parse(text) if t.type == "fence"]
    assert [(b.fence.info, b.code) for b in code_blocks(text)] == [
        (t.info.strip(), t.content) for t in tokens
    ]

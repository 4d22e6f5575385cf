"""The incremental splitter equals a full parse at every step, for any chunking."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from iris.app.core.breaks import hard_breaks
from iris.app.core.mdstream import MarkdownFeed, MarkdownSplitter, make_parser

MD = make_parser()

BLOCKS = [
    "# Heading one\n",
    "## Second *level*\n",
    "Setext title\n---\n",
    "A paragraph with **bold**, `code` and a [link](https://example.com).\nIt wraps here.\n",
    "1. one\n\n2. two\n\n3. three\n",
    "1. one\n2. two\n",
    "- apple\n- banana\n  - nested\n- cherry\n",
    "- loose\n\n  second para\n- item\n",
    "```python\ndef f(x):\n    return x * 2\n```\n",
    "~~~\nraw ~~~ text\n~~~\n",
    "| name | qty |\n| --- | ---: |\n| pear | 3 |\n| fig | 10 |\n",
    "> a quote\n> continues\n",
    "    indented code\n",
    "***\n",
    "Plain closing line.\n",
    "<div>\nhtml block\n</div>\n",
]
DOCS = st.lists(
    st.tuples(st.sampled_from(BLOCKS), st.sampled_from(["", "\n", "\n\n"])), min_size=1, max_size=8
).map(lambda parts: "".join(block + gap for block, gap in parts))


def render(tokens: object) -> str:
    return MD.renderer.render(list(tokens), MD.options, {})  # type: ignore[call-overload]


def incremental_html(splitter: MarkdownSplitter) -> str:
    return "".join(render(b.tokens) for b in splitter.settled) + render(splitter.tail_tokens)


@settings(max_examples=60, deadline=None)
@given(DOCS, st.lists(st.integers(1, 30), max_size=80), st.booleans())
def test_incremental_parse_equals_full_parse_at_every_step(
    doc: str, sizes: list[int], breaks: bool
) -> None:
    text = hard_breaks(doc) if breaks else doc
    splitter, at = MarkdownSplitter(), 0
    for size in [*sizes, len(text)]:
        splitter.append(text[at : at + size])
        at += size
        assert splitter.source == text[:at]
        assert incremental_html(splitter) == MD.render(text[:at])
        if at >= len(text):
            break


def test_ordered_list_streamed_by_character_stays_one_list() -> None:
    doc = "1. one\n\n2. two\n\n3. three"
    splitter = MarkdownSplitter()
    for char in doc:
        splitter.append(char)
    html = incremental_html(splitter)
    assert html.count("<ol>") == 1 and html == MD.render(doc)


def test_settled_blocks_keep_identity_and_are_not_reparsed() -> None:
    splitter = MarkdownSplitter()
    splitter.append("# Title\n\nfirst para\n\n")
    splitter.append("second para\n")
    first = list(splitter.settled)
    assert [b.source for b in first] == ["# Title\n\n", "first para\n\n"]
    before = splitter.parsed_chars
    splitter.append("more of the second para\n")
    assert all(a is b for a, b in zip(first, splitter.settled[:2], strict=True))
    # Only the tail was parsed again, not the settled blocks.
    assert splitter.parsed_chars - before == len(splitter.tail)


def test_a_rewrite_reseeds_the_feed() -> None:
    feed = MarkdownFeed()
    feed.show("# A\n\nalpha\n\nbeta")
    step = feed.show("# B\n\ngamma")
    assert step.reseeded
    html = incremental_html(feed.splitter)
    assert html == MD.render(hard_breaks("# B\n\ngamma"))

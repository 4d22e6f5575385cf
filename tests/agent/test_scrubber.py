"""The think scrubber: no tag fragment ever reaches a consumer, for any chunking."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from iris.agent.scrubber import ThinkScrubber, finalize, scrub

# The oracle for the streamed reasoning: every block's inner text, an unclosed one to the end.
_BLOCK = re.compile(r"<(think|thinking|reasoning)>(.*?)(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)


def reasoning_of(text: str) -> str:
    return "".join(match.group(2) for match in _BLOCK.finditer(text))


_PIECES = st.sampled_from(
    [
        "<think>",
        "</think>",
        "<thinking>",
        "</thinking>",
        "<reasoning>",
        "</reasoning>",
        "<THINK>",
        "</Think>",
        "<",
        ">",
        "</",
        "<th",
        "ink",
        "<b>",
        "a < b",
        "x",
        " ",
        "\n",
        "hello",
        "wörld 🙂",
        "think",
        "</thinkx>",
    ]
)
_TEXTS = st.lists(_PIECES, max_size=25).map("".join)


def _run(text: str, cuts: list[int]) -> tuple[list[str], str]:
    scrubber = ThinkScrubber()
    bounds = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    visible: list[str] = []
    reasoning: list[str] = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        shown, thought = scrubber.feed(text[start:end])
        visible.append(shown)
        reasoning.append(thought)
    shown, thought = scrubber.flush()
    visible.append(shown)
    reasoning.append(thought)
    return visible, "".join(reasoning)


@settings(max_examples=400, deadline=None)
@given(_TEXTS, st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_any_chunking_shows_exactly_the_scrubbed_text(text: str, cuts: list[int]) -> None:
    visible, reasoning = _run(text, cuts)
    assert "".join(visible) == scrub(text)
    assert reasoning == reasoning_of(text)


@settings(max_examples=200, deadline=None)
@given(_TEXTS, st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_no_delta_holds_an_opening_tag_fragment_that_later_completes(
    text: str, cuts: list[int]
) -> None:
    # Whatever was emitted can never be the start of a reasoning block: the text shown so far
    # is always a prefix of the final visible text.
    visible, _ = _run(text, cuts)
    final = scrub(text)
    shown = ""
    for piece in visible:
        shown += piece
        assert final.startswith(shown)


def test_tags_split_across_deltas() -> None:
    visible, reasoning = _run("Hi <think>plan</think>there", [5, 8, 17, 19])
    assert "".join(visible) == "Hi there"
    assert reasoning == "plan"
    assert all("<" not in piece and ">" not in piece for piece in visible)


def test_unclosed_block_is_reasoning_and_stray_bracket_is_text() -> None:
    assert scrub("a <b> c <think>never closed") == "a <b> c "
    assert finalize("  <think>x</think>\n\nAnswer \n") == "Answer"

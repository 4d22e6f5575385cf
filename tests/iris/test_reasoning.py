"""Doc 05 §5.2's split of reasoning laid out in the answer text, and its fallback."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iris.surfaces.iris.reasoning import split_reasoning


def test_code_style() -> None:
    text = "💭 **Reasoning:**\n```\nfirst\nsecond\n```\n\nThe answer."
    assert split_reasoning(text) == ("first\nsecond", "The answer.")


def test_code_style_with_a_longer_fence() -> None:
    text = "💭 **Reasoning:**\n````\nuse ``` here\n````\n\nok"
    assert split_reasoning(text) == ("use ``` here", "ok")


def test_blockquote_style() -> None:
    text = "> 💭 **Reasoning:**\n> one\n>\n> two\n\nAnswer\n\nmore"
    assert split_reasoning(text) == ("one\n\ntwo", "Answer\n\nmore")


def test_subtext_style() -> None:
    text = "-# 💭 Reasoning\n-# step one\n-# step two\n\nDone."
    assert split_reasoning(text) == ("step one\nstep two", "Done.")


def test_fallback_is_no_reasoning_and_the_full_text() -> None:
    for text in (
        "plain answer",
        "💭 **Reasoning:**\n```\nnever closed",
        "> 💭 **Reasoning:**\n> a\nnot blank after the quote",
        "",
    ):
        assert split_reasoning(text) == (None, text)


lines = st.lists(
    st.text(alphabet=st.characters(blacklist_characters="\n`\r"), min_size=1, max_size=20),
    min_size=1,
    max_size=5,
)


@given(lines, st.text(max_size=60))
def test_code_layout_round_trips(reasoning_lines: list[str], answer: str) -> None:
    reasoning = "\n".join(reasoning_lines)
    text = f"💭 **Reasoning:**\n```\n{reasoning}\n```\n\n{answer}"
    assert split_reasoning(text) == (reasoning, answer)


@given(lines, st.text(max_size=60))
def test_blockquote_layout_round_trips(reasoning_lines: list[str], answer: str) -> None:
    quoted = "\n".join(f"> {line}" for line in reasoning_lines)
    text = f"> 💭 **Reasoning:**\n{quoted}\n\n{answer}"
    assert split_reasoning(text) == ("\n".join(reasoning_lines), answer)

"""Doc 05 §5.2's reasoning layouts: what the writer lays out, the reader takes apart again."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iris.config import ReasoningStyle
from iris.formats.reasoning import split_reasoning, with_reasoning

STYLES: tuple[ReasoningStyle, ...] = ("code", "blockquote", "subtext")


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        ("code", "💭 **Reasoning:**\n```\nfirst\n\nsecond\n```\n\nThe answer."),
        ("blockquote", "> 💭 **Reasoning:**\n> first\n>\n> second\n\nThe answer."),
        ("subtext", "-# 💭 Reasoning\n-# first\n-# second\n\nThe answer."),
    ],
)
def test_the_writer_uses_the_exact_form_of_doc_05(style: ReasoningStyle, expected: str) -> None:
    assert with_reasoning("The answer.", "first\n\nsecond", style) == expected


def test_blockquote_written_by_a_chat_surface_is_read_back() -> None:
    # The chat surface once wrote the header unquoted, which the reader did not recognise.
    text = with_reasoning("The answer.", "think hard", "blockquote")
    assert split_reasoning(text) == ("think hard", "The answer.")


def test_code_style_with_a_longer_fence() -> None:
    text = "💭 **Reasoning:**\n````\nuse ``` here\n````\n\nok"
    assert split_reasoning(text) == ("use ``` here", "ok")
    assert with_reasoning("ok", "use ``` here", "code") == text


def test_subtext_headers_other_gateways_write_are_read() -> None:
    for header in ("-# 💭 Reasoning", "-# 💭 Reasoning:", "-# 💭 **Reasoning:**"):
        text = f"{header}\n-# step one\n-# step two\n\nDone."
        assert split_reasoning(text) == ("step one\nstep two", "Done.")


def test_no_reasoning_leaves_the_answer_alone() -> None:
    for style in STYLES:
        assert with_reasoning("The answer.", " \n ", style) == "The answer."


def test_fallback_is_no_reasoning_and_the_full_text() -> None:
    for text in (
        "plain answer",
        "💭 **Reasoning:**\n```\nnever closed",
        "> 💭 **Reasoning:**\n> a\nnot blank after the quote",
        "💭 **Reasoning:**\n> the unquoted header is not the blockquote layout\n\nA",
        "",
    ):
        assert split_reasoning(text) == (None, text)


reasonings = st.text(st.characters(codec="utf-8"), max_size=80).filter(lambda r: r.strip())
answers = st.text(st.characters(codec="utf-8"), max_size=60)


@given(reasonings, answers, st.sampled_from(["code", "blockquote"]))
def test_code_and_blockquote_round_trip(reasoning: str, answer: str, style: ReasoningStyle) -> None:
    assert split_reasoning(with_reasoning(answer, reasoning, style)) == (reasoning.strip(), answer)


@given(reasonings, answers)
def test_subtext_round_trips_but_for_blank_lines(reasoning: str, answer: str) -> None:
    kept = "\n".join(line for line in reasoning.strip().split("\n") if line)
    assert split_reasoning(with_reasoning(answer, reasoning, "subtext")) == (kept, answer)

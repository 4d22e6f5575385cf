"""Grapheme boundaries: Unicode's extended clusters, found near the index asked about."""

from __future__ import annotations

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from iris.app.core.graphemes import boundary_at_or_after, boundary_at_or_before, is_boundary


@pytest.mark.parametrize(
    "cluster",
    [
        "\u1100\u1161",  # Hangul choseong + jungseong (L + V jamo): one syllable
        "\u1100\u1161\u11a8",  # L + V + T
        "\u0915\u094d\u0937",  # Devanagari क्ष: a conjunct through the virama
        "\u0e01\u0e33",  # Thai ก + ◌ำ (a spacing mark)
        "👨\u200d👩\u200d👧",  # a ZWJ family
        "👍🏽",  # a skin tone
        "🇯🇵",  # a flag: a pair of regional indicators
        "e\u0301\u0327",  # combining marks
        "1\ufe0f\u20e3",  # a keycap
        "\r\n",
    ],
)
def test_no_cut_inside_a_cluster(cluster: str) -> None:
    text = f"a{cluster}{cluster}b"
    starts = [1, 1 + len(cluster), 1 + 2 * len(cluster)]
    for i in range(len(text) + 1):
        assert is_boundary(text, i) == (i in (0, len(text), *starts)), (cluster, i)
    middle = 2
    assert boundary_at_or_before(text, middle) == 1
    assert boundary_at_or_after(text, middle) == 1 + len(cluster)


def test_flags_pair_from_the_start_of_the_run() -> None:
    text = "🇯🇵🇫🇷🇩🇪"
    assert [i for i in range(len(text) + 1) if is_boundary(text, i)] == [0, 2, 4, 6]


PIECES = st.sampled_from(
    ["a", " ", "\n", "\r", "\u1100", "\u1161", "\u11a8", "\u0915", "\u094d", "\u0937", "\u0e01"]
    + ["\u0e33", "👨", "\u200d", "🏽", "🇯", "🇵", "\u0301", "\ufe0f", "\u20e3", "\u0600", "字"]
)


@given(st.lists(PIECES, max_size=40).map("".join))
def test_boundaries_are_those_of_the_whole_text(text: str) -> None:
    whole = {0, *(m.end() for m in regex.finditer(r"\X", text))}
    for i in range(len(text) + 1):
        assert is_boundary(text, i) == (i in whole), i
        before, after = boundary_at_or_before(text, i), boundary_at_or_after(text, i)
        assert before == max(b for b in whole if b <= i)
        assert after == min(b for b in whole if b >= i)

"""Spoken text: Markdown out as it streams, never half a word, however the deltas are cut."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iris.formats.speech import Speech, spoken

ANSWER = "**Done!** I turned on:\n\n- Kitchen Light: `on`\n- [Hall](http://ha.local/hall) light\n"


def test_markdown_is_not_read_aloud() -> None:
    assert spoken(ANSWER) == "Done! I turned on:\n\nKitchen Light: on\nHall light"
    assert spoken("## Status\n> all **good**, ~~bad~~ fine") == "Status\nall good, bad fine"
    assert spoken("Set light.kitchen_light to 50%.") == "Set light.kitchen_light to 50%."
    assert spoken("```\ncode\n```\nok") == "code\n\nok"  # a fence line goes, its break stays
    table = spoken("| Room | State |\n| Hall | on |")
    assert [" ".join(line.split()) for line in table.splitlines()] == ["Room State", "Hall on"]


def cuts(text: str, points: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(p % (len(text) + 1) for p in points)})
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


MARKDOWNISH = st.text(alphabet=st.sampled_from(list("ab *_`#-[]()|>\n.!")), max_size=80)


@given(MARKDOWNISH, st.lists(st.integers(0, 200), max_size=12))
def test_any_cut_of_the_deltas_speaks_the_same_and_never_splits_a_word(
    text: str, points: list[int]
) -> None:
    speech = Speech()
    deltas = [speech.feed(piece) for piece in cuts(text, points)]
    whole = "".join(deltas) + speech.end()
    assert whole == spoken_raw(text)
    said = 0
    for delta in deltas:
        said += len(delta)
        # Where a delta stops there is a space on one side or the other: no word is cut.
        at_edge = said == len(whole) or not delta
        assert at_edge or whole[said].isspace() or whole[said - 1].isspace()


def spoken_raw(text: str) -> str:
    speech = Speech()
    return speech.feed(text) + speech.end()


@given(st.lists(st.sampled_from(["**Do", "ne**", " ", "`on`", "\n- ", "x", "[a](u)"]), max_size=20))
def test_no_marks_reach_the_speaker(deltas: list[str]) -> None:
    speech = Speech()
    out = "".join(speech.feed(d) for d in deltas) + speech.end()
    assert "**" not in out and "`" not in out and "](" not in out
    assert not any(line.startswith("- ") for line in out.splitlines())

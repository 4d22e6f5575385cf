"""Splitting a long reply into platform-sized messages."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from iris.formats.fences import fence_after
from iris.surfaces.chat.splitter import fence_at, measure, rejoin, split

# Text that exercises the hard cases: astral characters (2 UTF-16 units), fences, newlines.
_alphabet = st.sampled_from(list("ab c\n`~") + ["😀", "é", "```", "```py\n", "\n```\n", "~~~\n"])
texts = st.lists(_alphabet, max_size=300).map("".join)


@settings(max_examples=400, deadline=None)
@given(
    text=texts,
    limit=st.integers(min_value=8, max_value=120),
    unit=st.sampled_from(["utf16", "chars"]),
)
def test_parts_rejoin_to_the_text_and_each_fits(text: str, limit: int, unit: str) -> None:
    parts = split(text, limit, unit)  # type: ignore[arg-type]
    assert "".join(p.raw for p in parts) == text
    for part in parts:
        assert part.raw, "every part makes progress"
        assert measure(part.text, unit) <= limit  # type: ignore[arg-type]
        # Never half of a surrogate pair: every part encodes on its own.
        part.text.encode("utf-16-le")


@settings(max_examples=200, deadline=None)
@given(
    blocks=st.lists(
        st.tuples(
            st.booleans(), st.lists(st.sampled_from(["x", "yy zz", "😀 w", ""]), max_size=12)
        ),
        min_size=1,
        max_size=6,
    ),
    limit=st.integers(min_value=30, max_value=90),
)
def test_a_part_never_leaves_a_code_block_open(
    blocks: list[tuple[bool, list[str]]], limit: int
) -> None:
    chunks = []
    for is_code, lines in blocks:
        body = "\n".join(lines)
        chunks.append(f"```python\n{body}\n```" if is_code else body)
    text = "\n\n".join(chunks) + "\n"
    for part in split(text, limit, "utf16"):
        assert fence_after(part.text + "\n") is None, part.text


def test_a_code_block_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"print({i})" for i in range(40))
    text = f"Here:\n```python\n{code}\n```\nDone."
    parts = split(text, 100, "chars")
    assert len(parts) > 2
    assert parts[0].text.endswith("\n```")
    for part in parts[1:]:
        assert part.text.startswith("```python\n")
    assert parts[-1].text.endswith("```\nDone.")


def test_telegram_counts_utf16_units() -> None:
    text = "😀" * 10  # 20 UTF-16 units, 10 code points
    parts = split(text, 7, "utf16")
    assert [p.raw for p in parts] == ["😀😀😀", "😀😀😀", "😀😀😀", "😀"]
    assert split(text, 10, "chars")[0].raw == text


def test_cuts_prefer_line_breaks_then_spaces() -> None:
    text = "first line here\nsecond line is here and long"
    assert split(text, 20, "chars")[0].raw == "first line here\n"
    assert split("aaaa bbbb cccc dddd", 12, "chars")[0].raw == "aaaa bbbb "


def test_start_continues_mid_reply_inside_a_fence() -> None:
    text = "```sh\nls\npwd\n```\n"
    parts = split(text, 100, "chars", start=len("```sh\nls\n"))
    assert parts[0].text == "```sh\npwd\n```\n"


def test_a_continuation_reads_on_as_the_messages_before_it_read() -> None:
    # "ab ```py" is text, but a message that began after "ab " starts with "```py": it opened
    # a block there and closed it at the next line, so no code is open where the reply's own
    # reading has one open (the bare "```" line opened it).
    text = "ab ```py\n```\n\n```"
    assert fence_at(text, 13) is not None
    assert fence_at(text, 13, starts=[3]) is None
    assert [part.text for part in split(text, 100, start=13, starts=[3])] == ["\n```"]
    # Read from the reply's start instead, the continuation reopened a fence the user never saw.
    assert [part.text for part in split(text, 100, start=13)] == ["```\n\n```"]


def test_a_cut_never_leaves_the_next_message_a_line_that_reads_as_a_fence() -> None:
    # The space before "```py" is the cut a full window finds; the next message would start
    # with "```py and more" and open a code block the reply does not have.
    text = "x\naaaaaaaa bbbbbbbb ```py and more"
    parts = [part.text for part in split(text, 24)]
    assert parts[0] == "x\n"
    assert rejoin(parts) == text
    assert all(not part.startswith("```") for part in parts)


def test_a_block_cut_inside_code_closes_its_fence_when_the_reply_goes_on() -> None:
    text = "intro\n```py\nx = 1\n"
    assert [part.text for part in split(text, 100)] == [text]  # the whole reply: as it is
    # A block cut from a reply that goes on: its message must not leave the code open.
    assert [part.text for part in split(text, 100, going_on=True)] == [text + "```"]
    assert [part.text for part in split("intro\n", 100, going_on=True)] == ["intro\n"]


def test_empty_text_has_no_parts_and_a_bad_limit_is_an_error() -> None:
    assert split("", 10) == []
    try:
        split("x", 0)
    except ValueError as exc:
        assert "limit" in str(exc)
    else:
        raise AssertionError("limit 0 accepted")


code_lines = st.lists(st.sampled_from(["x", "yy zz", "😀 w", "", "``", "~~~ x"]), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    blocks=st.lists(
        st.tuples(st.sampled_from(["", "```python", "~~~~ sh", "```"]), code_lines),
        min_size=1,
        max_size=6,
    ),
    limit=st.integers(min_value=30, max_value=90),
    unit=st.sampled_from(["utf16", "chars"]),
)
def test_the_reader_rejoins_the_rendered_parts_into_the_reply(
    blocks: list[tuple[str, list[str]]], limit: int, unit: str
) -> None:
    chunks = []
    for opening, lines in blocks:
        body = "\n".join(lines)
        closing = opening[:3] if opening else ""
        chunks.append(f"{opening}\n{body}\n{closing}" if opening else body)
    text = "\n\n".join(chunks) + "\n"
    parts = split(text, limit, unit)  # type: ignore[arg-type]
    # A closing marker starts a line: a cut inside a code line reads back as a line break.
    assume(all(part.raw.endswith("\n") for part in parts if part.suffix))
    assert rejoin([part.text for part in parts]) == text


def test_a_cut_inside_a_long_code_line_reads_back_as_a_line_break() -> None:
    text = "```\n" + "x" * 50 + "\n```\n"
    parts = split(text, 30, "chars")
    assert [part.text for part in parts][:2] == [
        "```\n" + "x" * 22 + "\n```",
        "```\n" + "x" * 22 + "\n```",
    ]
    assert (
        rejoin([part.text for part in parts])
        == "```\n" + "x" * 22 + "\n" + "x" * 22 + "\n" + "x" * 6 + "\n```\n"
    )

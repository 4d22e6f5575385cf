"""Block streaming for platforms that cannot edit, on the virtual clock: what the user receives.

A reply arrives as paragraph-sized messages while it forms: the messages read in order are the
reply, none ends inside a word or an open code fence, nothing is sent twice, the chat's budget
is kept, and a retry that changes text already sent restates it once, marked.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from iris.events import (
    Event,
    ReasoningDelta,
    SegmentEnded,
    StreamReset,
    TextDelta,
    ToolEnded,
    ToolStarted,
    TurnEnded,
    TurnFailed,
)
from iris.formats.fences import fence_after
from iris.surfaces.chat.budget import RateBudget
from iris.surfaces.chat.platforms.base import Capabilities
from iris.surfaces.chat.reply import CORRECTION, INTERRUPTED, block_end
from iris.surfaces.chat.splitter import rejoin
from tests.chat.sim import Failed, Outcome, RateLimited, SimResult, display, simulate

Timeline = list[tuple[float, Event]]

WHATSAPP = Capabilities(
    can_edit=False, max_length=4096, length_unit="chars", rate=RateBudget(1, 1.0)
)


def caps(limit: int = 4096, rate: RateBudget | None = None) -> Capabilities:
    return Capabilities(
        can_edit=False, max_length=limit, length_unit="chars", rate=rate or RateBudget(1, 1.0)
    )


def streamed(chunks: list[str], *, every: float = 0.05, final: str | None = None) -> Timeline:
    events: Timeline = [(i * every, TextDelta(c)) for i, c in enumerate(chunks)]
    end = len(chunks) * every
    text = "".join(chunks).strip() if final is None else final
    return [*events, (end, SegmentEnded(text)), (end, TurnEnded(text))]


def paragraph(i: int, words: int = 12) -> str:
    return " ".join(f"p{i}w{j}" for j in range(words)) + ".\n\n"


def word_chunks(text: str) -> list[str]:
    """The text as a model streams it: a word (with what follows it) at a time."""
    out: list[str] = []
    word = ""
    for ch in text:
        word += ch
        if ch in " \n":
            out.append(word)
            word = ""
    return [*out, word] if word else out


def read_back(chat: list[str], text: str) -> list[int]:
    """Check the messages read in order are ``text``; where each but the last ends in it.

    A message read back loses the fence it reopens and the marker that closes it early
    (``rejoin``). A code line longer than a message is cut in two and the closing marker takes
    a line of its own: that reads back as a line break there, the one thing a reader adds."""
    cuts: list[int] = []
    pos, before = 0, ""
    for k in range(len(chat)):
        upto = rejoin([*chat[: k + 1], ""] if k < len(chat) - 1 else chat)
        piece, before = upto[len(before) :], upto
        if not text.startswith(piece, pos):
            wrapped = piece.endswith("\n") and chat[k].endswith("\n```")
            assert wrapped and text.startswith(piece[:-1], pos), (pos, piece, chat)
            piece = piece[:-1]  # a code line cut in two: its break is the message's
        pos += len(piece)
        cuts.append(pos)
    assert pos == len(text), (text[pos:], chat)  # nothing lost
    return cuts[:-1]


def test_a_reply_arrives_as_paragraph_blocks_that_read_back_as_the_reply() -> None:
    text = "".join(paragraph(i) for i in range(6)).strip()
    shown = display(min_block_chars=150, block_idle=5.0)
    result = simulate(streamed(word_chunks(text)), caps=caps(), shown=shown)
    chat = result.chat()
    assert "".join(chat) == text
    assert 2 <= len(chat) < 6, chat  # paragraph-sized, never one per delta
    assert all(m.endswith("\n\n") for m in chat[:-1]), "each block ends a paragraph"
    assert all(len(m) >= 150 for m in chat[:-1])
    assert all(c.kind == "send" for c in result.calls)
    # The first block goes before the reply is over: the user reads while it forms.
    assert result.calls[0].t < len(word_chunks(text)) * 0.05


def test_blocks_keep_the_chat_budget_and_merge_while_waiting() -> None:
    # Forty paragraphs in 8 s against one message per 6 s to this user (WhatsApp's pair limit).
    text = "".join(paragraph(i, 4) for i in range(40)).strip()
    chunks = word_chunks(text)
    pair = RateBudget(1, 6.0)
    shown = display(min_block_chars=20, block_idle=30.0)
    result = simulate(streamed(chunks, every=8.0 / len(chunks)), caps=caps(rate=pair), shown=shown)
    chat = result.chat()
    assert "".join(chat) == text
    sends = [c.t for c in result.calls]
    assert all(b - a >= 6.0 - 1e-6 for a, b in zip(sends, sends[1:], strict=False)), sends
    assert len(chat) <= 3, "blocks that waited for the budget went out as one"


def test_silence_sends_what_is_complete_but_never_half_a_word() -> None:
    # A sentence, then the model stalls mid-word for 10 s (a slow tool, a slow provider).
    events: Timeline = [(0.0, TextDelta("Looking that up for you, one ")), (0.1, TextDelta("mom"))]
    events += [(10.0, TextDelta("ent please.")), (10.1, SegmentEnded("x")), (10.1, TurnEnded("x"))]
    final = "Looking that up for you, one moment please."
    events[-2:] = [(10.1, SegmentEnded(final)), (10.1, TurnEnded(final))]
    result = simulate(events, caps=caps(), shown=display(block_idle=2.0))
    assert result.chat() == ["Looking that up for you, one ", "moment please."]
    assert 2.0 <= result.calls[0].t < 3.0


def test_an_open_code_fence_waits_for_its_close() -> None:
    code = "```python\n" + "".join(f"x{i} = {i}\n" for i in range(30)) + "```\n\n"
    text = "Here is the code:\n\n" + code + "That is all."
    shown = display(min_block_chars=10, block_idle=1.0)
    # A pause inside the fence longer than block_idle: still nothing of the code goes.
    chunks = word_chunks(text)
    events: Timeline = []
    t = 0.0
    for chunk in chunks:
        t += 3.0 if chunk == "x15 " else 0.02
        events.append((t, TextDelta(chunk)))
    events += [(t + 0.1, SegmentEnded(text)), (t + 0.1, TurnEnded(text))]
    result = simulate(events, caps=caps(), shown=shown)
    chat = result.chat()
    assert "".join(chat) == text
    assert all(fence_after(m) is None for m in chat), chat
    assert any(m.startswith("```python") and m.rstrip().endswith("```") for m in chat)


def test_a_block_that_starts_mid_line_is_read_as_its_message_shows_it() -> None:
    # Silence sends "ab "; then "```py" arrives: inline text in the reply, but the next block
    # starts with it, so that message opens a block and its next line closes it. The blocks
    # after read on from there: no code is open, so none is reopened (no stray "```").
    text = "ab ```py\n```\n\n```"
    events: Timeline = [(i * 1.5, TextDelta(c)) for i, c in enumerate(word_chunks(text))]
    events += [(7.5, SegmentEnded(text)), (7.5, TurnEnded(text))]
    result = simulate(events, caps=caps(60), shown=display(min_block_chars=0, block_idle=0.5))
    chat = result.chat()
    assert chat == ["ab ", "```py\n```\n", "\n```"]
    assert "".join(chat) == text == rejoin(chat)


def test_a_reset_after_blocks_went_out_sends_a_short_correction() -> None:
    first = paragraph(0) + paragraph(1) + paragraph(2)
    replay = paragraph(0) + "A better second paragraph.\n\n" + paragraph(3)
    final = replay.strip()
    events: Timeline = [(i * 0.05, TextDelta(c)) for i, c in enumerate(word_chunks(first))]
    t = len(word_chunks(first)) * 0.05 + 3.0  # the blocks of the first attempt are out
    events.append((t, StreamReset("upstream failed; retrying")))
    events += [(t + 0.1 + i * 0.05, TextDelta(c)) for i, c in enumerate(word_chunks(replay))]
    end = t + 0.2 + len(word_chunks(replay)) * 0.05
    events += [(end, SegmentEnded(final)), (end, TurnEnded(final))]
    shown = display(min_block_chars=20, block_idle=30.0)
    result = simulate(events, caps=caps(rate=RateBudget(10, 1.0)), shown=shown)
    chat = result.chat()
    assert chat[:2] == [paragraph(0), paragraph(1)]
    corrections = [m for m in chat if m.startswith(CORRECTION)]
    assert corrections == [CORRECTION + "A better second paragraph.\n\n"]
    restated = chat[chat.index(corrections[0]) :]
    # The streamed replay ended in a blank line the settled text trims.
    assert "".join(restated).removeprefix(CORRECTION).rstrip() == final.removeprefix(paragraph(0))
    assert chat.count(paragraph(0)) == 1, "never the whole reply twice"


def test_an_interrupt_sends_what_was_complete_and_marks_it() -> None:
    events: Timeline = [(0.0, TextDelta(paragraph(0))), (0.1, TextDelta("and then the rest wa"))]
    events.append((0.2, TurnEnded(paragraph(0) + "and then the rest wa", reason="interrupted")))
    result = simulate(events, caps=caps(), shown=display(min_block_chars=1000, block_idle=30.0))
    assert result.chat() == [paragraph(0) + "and then the rest" + INTERRUPTED]


def test_a_failure_sends_the_rest_with_the_notice() -> None:
    events: Timeline = [(i * 0.05, TextDelta(c)) for i, c in enumerate(word_chunks(paragraph(0)))]
    events.append((1.0, TextDelta("half a sentence")))
    events.append((1.1, TurnFailed("upstream_error", "The model failed.", partial_text="")))
    result = simulate(events, caps=caps(), shown=display(min_block_chars=10, block_idle=30.0))
    chat = result.chat()
    assert chat[0] == paragraph(0)
    assert chat[-1].startswith("half a sentence") and chat[-1].endswith("⚠️ The model failed.")


def test_tool_lines_and_reasoning_go_out_as_blocks_in_order() -> None:
    events: Timeline = [(0.0, ReasoningDelta("I should list the files."))]
    events += [(0.5, ToolStarted(1, "terminal", {"cmd": "ls"}))]
    events += [(1.0, ToolEnded(1, "terminal", True, 0.5, "a.txt"))]
    events += [
        (2.0, TextDelta("There is one file: a.txt.")),
        (2.1, SegmentEnded("There is one file: a.txt.")),
    ]
    events += [(2.1, TurnEnded("There is one file: a.txt."))]
    shown = display(show_reasoning=True, tool_progress="all", block_idle=30.0)
    result = simulate(events, caps=caps(rate=RateBudget(10, 1.0)), shown=shown)
    chat = result.chat()
    assert chat[0].startswith("💭 **Reasoning:**") and "list the files" in chat[0]
    assert chat[1] == "🔧 terminal: ls"
    assert chat[2] == "There is one file: a.txt."


def test_transport_final_sends_one_message_at_the_end() -> None:
    text = "".join(paragraph(i) for i in range(6)).strip()
    result = simulate(streamed(word_chunks(text)), caps=caps(), shown=display(transport="final"))
    assert result.chat() == [text]


def test_a_platform_that_edits_can_ask_for_blocks() -> None:
    text = "".join(paragraph(i) for i in range(4)).strip()
    shown = display(transport="blocks", min_block_chars=50, block_idle=30.0)
    edits = Capabilities(
        can_edit=True, max_length=4096, length_unit="utf16", rate=RateBudget(10, 1.0)
    )
    result = simulate(streamed(word_chunks(text)), caps=edits, shown=shown)
    assert len(result.chat()) == 4 and "".join(result.chat()) == text
    assert {c.kind for c in result.calls} == {"send"}


def test_block_end_rules() -> None:
    assert block_end("one two", 0, 0, 100) == 0  # no paragraph is complete
    assert block_end("one two", 0, 0, 100, idle=True) == 4  # silence: up to the last word
    assert block_end("a\n\nb\n\nc", 0, 1, 100) == 6  # the last boundary: everything complete
    assert block_end("a\n\nbbbbbb\n\nc", 0, 5, 100) == 11
    assert block_end("a\n\nb", 0, 5, 100) == 0  # not enough gathered yet
    assert block_end("x\n\n```\ncode\n\nmore", 0, 1, 100, idle=True) == 3  # never into the fence
    assert block_end("```\ncode\n```\nafter", 0, 1, 100) == 13  # a closed fence is complete
    assert block_end("\n\n", 0, 0, 100, idle=True) == 0  # blank text is no block


# -- properties -------------------------------------------------------------------------------

_piece = st.sampled_from(["ab ", "cd ", "long-word ", "x\n", "\n\n", "```py\n", "```\n", "😀 "])
_outcome = st.one_of(
    st.none(),
    st.builds(RateLimited, st.sampled_from([0.5, 2.0])),
    st.builds(Failed, st.booleans()),
)


def _short_runs(script: list[Outcome]) -> bool:
    run = 0
    for outcome in script:
        # A block is given up after FINAL_ATTEMPTS answers in a row that did not land it.
        lost = outcome is not None and outcome != Failed(maybe_landed=True)
        run = run + 1 if lost else 0
        if run > 3:
            return False
    return True


def _balanced(text: str) -> str:
    """Close a fence the pieces left open (a model's answer closes its code blocks)."""
    return text + "\n```" if fence_after(text + "\n") is not None else text


@settings(max_examples=120, deadline=None)
# An inline ```py (mid-line: text) sent after a block cut at the space before it: the next
# block starts with it, so reads it as a fence, and the blocks after read on from there.
@example(pieces=["ab ", "```py\n", "```\n"], every=1.5, limit=60, min_chars=0, idle=0.5, script=[])
# A message filled up inside code ("```py" and its close came as more than a message gathered):
# the block cut from the text so far closes the fence like any cut inside code.
@example(
    pieces=[*["ab "] * 3, *["long-word "] * 4, "x\n", "```py\n", "```\n", "ab "],
    every=0.02,
    limit=60,
    min_chars=80,
    idle=0.5,
    script=[],
)
# A code line longer than a message: cut at a space inside it, it reads back as two lines.
@example(
    pieces=["```py\n", *["ab "] * 4, *["long-word "] * 4],
    every=0.02,
    limit=60,
    min_chars=0,
    idle=0.5,
    script=[],
)
@given(
    pieces=st.lists(_piece, min_size=1, max_size=80),
    every=st.sampled_from([0.02, 0.3, 1.5]),
    limit=st.sampled_from([60, 200, 4096]),
    min_chars=st.sampled_from([0, 10, 80]),
    idle=st.sampled_from([0.5, 2.0, 60.0]),
    script=st.lists(_outcome, max_size=10).filter(_short_runs),
)
def test_blocks_read_back_as_the_reply_never_split_words_or_open_fences_or_repeat(
    pieces: list[str],
    every: float,
    limit: int,
    min_chars: int,
    idle: float,
    script: list[Outcome],
) -> None:
    text = _balanced("".join(pieces)).strip()
    if not text:
        return
    chunks = word_chunks(text)
    shown = display(min_block_chars=min_chars, block_idle=idle)
    result: SimResult = simulate(
        streamed(chunks, every=every, final=text), caps=caps(limit), shown=shown, outcomes=script
    )
    chat = result.chat()
    # Nothing lost, nothing twice: the blocks, read in order, are the reply.
    cuts = read_back(chat, text)
    assert all(len(m) <= limit for m in chat)
    assert all(m.strip() for m in chat), "no empty message"
    for k, cut in enumerate(cuts):
        # Never inside an open fence: every message but the last, read on its own as the user
        # reads it, closes the code it opens (a cut falls outside code, or, a code block longer
        # than a message, the block closes the fence and the next reopens it).
        assert fence_after(chat[k] + "\n") is None, (cut, chat)
        # Never mid-word: every cut falls after a space or a line break (the pieces' words are
        # shorter than half a message, so a full message always finds one).
        assert text[cut - 1] in " \n", (cut, chat)
    # A landed block is never sent again.
    landed = [c for c in result.calls if c.ok]
    assert len(landed) == len({c.message_id for c in landed})


@settings(max_examples=60, deadline=None)
@given(
    first=st.lists(st.integers(0, 5), min_size=2, max_size=6),
    replay=st.lists(st.integers(0, 5), min_size=1, max_size=6),
)
def test_a_reset_restates_from_the_first_changed_block_only(
    first: list[int], replay: list[int]
) -> None:
    attempt = "".join(paragraph(i, 5) for i in first)
    retry = "".join(paragraph(i, 5) for i in replay)
    final = retry.strip()
    events: Timeline = [(i * 0.05, TextDelta(c)) for i, c in enumerate(word_chunks(attempt))]
    t = len(word_chunks(attempt)) * 0.05 + 2.0
    events.append((t, StreamReset("retry")))
    events += [(t + 0.1 + i * 0.05, TextDelta(c)) for i, c in enumerate(word_chunks(retry))]
    end = t + 0.2 + len(word_chunks(retry)) * 0.05
    events += [(end, SegmentEnded(final)), (end, TurnEnded(final))]
    shown = display(min_block_chars=10, block_idle=60.0)
    chat = simulate(events, caps=caps(rate=RateBudget(20, 1.0)), shown=shown).chat()
    marked = [i for i, m in enumerate(chat) if m.startswith(CORRECTION)]
    assert len(marked) <= 1
    if not marked:
        assert "".join(chat).rstrip() == final  # the replay only went further than was sent
        return
    at = marked[0]
    before, after = "".join(chat[:at]), "".join(chat[at:]).removeprefix(CORRECTION)
    # What the correction restates starts where a block started, and what came before it
    # stands: the reply as corrected is the blocks before it, cut there, plus the correction.
    after = after.rstrip()  # the streamed replay ended in a blank line the settled text trims
    assert final.endswith(after)
    kept = final[: len(final) - len(after)]
    assert before.startswith(kept)
    assert before != final, "a correction only when something shown changed"

"""The reply as an outside caller sees it (``ReplyFold``, ``growth``): fed frame lists, compared
with what a reader must end up holding. The pure core of chat_send's progress and of the A2A
server's artifact chunks."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from iris.surfaces.mcp_server.fold import ReplyFold, Waiting, growth

segment_texts = st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=4)


def streamed(texts: list[str], cuts: list[int]) -> list[dict[str, Any]]:
    """The frames of a turn whose segments grow to ``texts`` through snapshots at ``cuts``."""
    frames: list[dict[str, Any]] = [{"type": "typing", "on": True}]
    for n, final in enumerate(texts):
        mid = f"m{n}"
        frames.append({"type": "message.start", "message_id": mid, "role": "assistant"})
        for cut in sorted({c % (len(final) + 1) for c in cuts}):
            frames.append({"type": "message.update", "message_id": mid, "text": final[:cut]})
        frames.append({"type": "message.stop", "message_id": mid, "final_text": final})
    frames.append({"type": "typing", "on": False})
    return frames


@given(segment_texts, st.lists(st.integers(min_value=0, max_value=40), max_size=6))
def test_appending_each_growth_gives_the_whole_reply_once(
    texts: list[str], cuts: list[int]
) -> None:
    fold, held = ReplyFold(), ""
    for frame in streamed(texts, cuts):
        told = fold.feed(frame)
        assert not isinstance(told, Waiting)
        if told is not None:
            piece, appended = growth(held, told)
            held = held + piece if appended else piece
            assert piece or not appended  # nothing is told twice
    assert fold.done and fold.error is None
    assert held == fold.text == "\n\n".join(texts)


@given(st.text(), st.text())
def test_growth_appends_exactly_what_extends_and_replaces_a_rewrite(before: str, text: str) -> None:
    piece, appended = growth(before, text)
    assert (before + piece if appended else piece) == text
    assert appended == text.startswith(before)


def test_an_approval_and_an_error_are_told_and_the_echo_is_not() -> None:
    fold = ReplyFold()
    echo = {"type": "message", "message_id": "u", "role": "user", "text": "hi"}
    asked = {
        "type": "approval.request",
        "approval_id": "ap1",
        "index": 1,
        "name": "terminal",
        "args": {"command": "ls"},
        "preview": "ls",
        "expires_at": 5.0,
    }
    assert fold.feed(echo) is None
    waiting = fold.feed(asked)
    assert waiting == Waiting("ap1", "terminal", {"command": "ls"}, "ls", 5.0)
    assert fold.feed({"type": "error", "code": "provider_error", "message": "down"}) is None
    assert fold.error == ("provider_error", "down") and not fold.done


def test_a_replayed_log_where_commentary_took_the_updates_place_keeps_that_text() -> None:
    """The log coalesces a message's updates into the ``commentary`` that closed it: a fold of
    the replay (another process resubscribing) still has the text said before the tool."""
    fold = ReplyFold()
    frames: list[dict[str, Any]] = [
        {"type": "message.start", "message_id": "m1", "role": "assistant"},
        {"type": "commentary", "message_id": "m1", "text": "Checking."},
        {"type": "message.start", "message_id": "m2", "role": "assistant"},
        {"type": "message.stop", "message_id": "m2", "final_text": "It ran."},
        {"type": "typing", "on": False},
    ]
    for frame in frames:
        fold.feed(frame)
    assert fold.done and fold.text == "Checking.\n\nIt ran."

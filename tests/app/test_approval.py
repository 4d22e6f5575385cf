"""Approval cards in the app's view model: approval.request / approval.resolved / the error
answering a late press, fed as frame lists (the rules web/js/approval.js shares)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from iris.app.core.approval import (
    LONG_CHARS,
    LONG_LINES,
    ApprovalCard,
    countdown_text,
    is_long,
    long_summary,
    outcome_text,
)
from iris.app.core.view import Bubble, ChatView

from .clock import FakeClock

COMMAND = "rm -rf build && make -j8 all"


def request(approval_id: str = "appr_1", **extra: Any) -> dict[str, Any]:
    return {
        "type": "approval.request",
        "approval_id": approval_id,
        "index": 1,
        "name": "terminal",
        "args": {"command": COMMAND},
        "preview": COMMAND,
        "expires_at": 1_000.0,
        **extra,
    }


def resolved(decision: str, by: str, approval_id: str = "appr_1") -> dict[str, Any]:
    return {"type": "approval.resolved", "approval_id": approval_id, "decision": decision, "by": by}


def turn(*tail: dict[str, Any]) -> list[dict[str, Any]]:
    """A turn that stops at a terminal call for a yes, then ``tail``; seqs as the server's."""
    bodies: list[dict[str, Any]] = [
        {"type": "message", "message_id": "u1", "role": "user", "text": "clean and build"},
        {"type": "typing", "on": True},
        {"type": "commentary", "message_id": "m1", "text": "Building."},
        {"type": "tool.start", "index": 1, "name": "terminal", "preview": COMMAND, "args": {}},
        request(),
        *tail,
    ]
    return [{"chat_id": "c1", "seq": n, **body} for n, body in enumerate(bodies, start=1)]


def fed(frames: list[dict[str, Any]]) -> ChatView:
    view = ChatView(FakeClock())
    for frame in frames:
        view.apply(frame)
    return view


def card_of(view: ChatView) -> ApprovalCard:
    [card] = [b.approval for b in view.bubbles if b.approval is not None]
    return card


def test_a_request_is_a_card_under_its_turn_with_the_whole_call() -> None:
    view = fed(turn())
    assert [(b.message_id, b.kind) for b in view.bubbles] == [
        ("u1", "message"),
        ("m1", "commentary"),
        ("approval-appr_1", "approval"),
    ]
    card = card_of(view)
    assert card.pending and card.outcome == ""
    assert (card.name, card.preview, card.expires_at) == ("terminal", COMMAND, 1_000.0)
    assert json.loads(card.args_text) == {"command": COMMAND}
    assert view.bubbles[1].tools[0].name == "terminal"  # the tool card stays on its segment


def test_the_decision_and_who_made_it_end_the_card() -> None:
    view = fed(turn(resolved("once", "phone")))
    card = card_of(view)
    assert not card.pending
    assert card.outcome == "Allowed once by phone"


def test_tools_after_the_card_hang_on_the_turns_message_not_on_the_card() -> None:
    later = {"type": "tool.start", "index": 2, "name": "read_file", "preview": "a", "args": {}}
    view = fed(turn(resolved("chat", "phone"), later))
    assert [t.index for t in view.bubbles[1].tools] == [1, 2]
    assert view.bubbles[2].tools == []


def test_a_replayed_request_does_not_reopen_a_decided_card() -> None:
    frames = turn(resolved("deny", "laptop"))
    view = fed([*frames, frames[4]])  # a resume replays the request's seq
    assert card_of(view).outcome == "Denied by laptop"


def test_a_late_press_is_told_it_was_already_decided_and_the_turn_goes_on() -> None:
    view = fed(turn())
    view.answered("appr_1", "deny")
    assert card_of(view).sent == "deny"
    view.apply(resolved("once", "phone") | {"chat_id": "c1", "seq": 6})
    view.apply(
        {"type": "error", "code": "approval_decided", "message": "already decided: once by phone"}
    )
    card = card_of(view)
    assert card.note == "Already decided" and card.outcome == "Allowed once by phone"
    assert view.typing  # the error answered the press; it did not end the turn
    assert [b.kind for b in view.bubbles].count("error") == 0


def test_a_press_in_flight_when_the_link_drops_can_be_made_again() -> None:
    view = fed(turn())
    view.answered("appr_1", "once")
    view.new_connection()
    assert card_of(view).sent is None and card_of(view).pending


def test_timeout_and_interrupt_end_the_card_with_nothing_run() -> None:
    assert card_of(fed(turn(resolved("timeout", "timeout")))).outcome == "Timed out — not run"
    cancelled = card_of(fed(turn(resolved("cancelled", "interrupt"))))
    assert cancelled.outcome == "Cancelled (interrupt) — not run"


def test_a_resolved_for_a_request_never_seen_changes_nothing() -> None:
    view = fed(turn())
    view.apply(resolved("once", "phone", "appr_2") | {"chat_id": "c1", "seq": 9})
    assert card_of(view).pending and len(view.bubbles) == 3


def test_a_card_bubble_is_bumped_on_every_change() -> None:
    view = fed(turn())
    bubble: Bubble = view.bubbles[2]
    before = bubble.version
    view.answered("appr_1", "once")
    view.apply(resolved("once", "phone") | {"chat_id": "c1", "seq": 6})
    assert bubble.version == before + 2


def test_texts() -> None:
    assert outcome_text("chat", "phone") == "Allowed in this chat by phone"
    assert outcome_text("deny", "") == "Denied"
    assert countdown_text(1_000.0, 880.0) == "2:00"
    assert countdown_text(1_000.0, 999.2) == "0:01"
    assert countdown_text(1_000.0, 1_005.0) == "0:00"
    assert not is_long(COMMAND)
    assert is_long("x" * (LONG_CHARS + 1)) and is_long("\n" * LONG_LINES)
    assert long_summary("Show", "a\nb") == "Show — 2 lines, 3 characters"


@given(st.floats(0, 10_000), st.floats(0, 10_000))
def test_the_countdown_never_goes_below_zero_and_reads_as_m_ss(expires: float, now: float) -> None:
    minutes, seconds = countdown_text(expires, now).split(":")
    assert int(minutes) >= 0 and 0 <= int(seconds) < 60 and len(seconds) == 2

"""The Python twin of the web app's approval cards (``iris.app.core.approval`` in
``iris.app.core.view.ChatView``) on the case file ``tests/webjs/approval.test.mjs`` reads
(``cases/approval.json``): the same frames and presses give the same cards in both apps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from iris.app.core.approval import countdown_text, is_long, long_summary, outcome_text
from iris.app.core.view import ChatView

APPROVAL: dict[str, Any] = json.loads(
    (Path(__file__).parent / "cases" / "approval.json").read_text(encoding="utf-8")
)


@pytest.mark.parametrize("case", APPROVAL["cases"], ids=[c["name"] for c in APPROVAL["cases"]])
def test_the_cards(case: dict[str, Any]) -> None:
    view = ChatView(lambda: 0.0)
    for step in case["steps"]:
        for frame in step.get("apply", []):
            view.apply(frame)
        if "answered" in step:
            view.answered(*step["answered"])
        if step.get("new_connection"):
            view.new_connection()
        expect: dict[str, Any] = step.get("expect", {})
        if "kinds" in expect:
            kinds = [[b.message_id, b.kind, len(b.tools)] for b in view.bubbles]
            assert kinds == expect["kinds"]
        if "cards" in expect:
            cards = [b.approval.state(case["now"]) for b in view.bubbles if b.approval]
            assert cards == expect["cards"]
        if "typing" in expect:
            assert view.typing == expect["typing"]


def test_the_texts_a_card_shows() -> None:
    texts = APPROVAL["texts"]
    for decision, by, want in texts["outcome"]:
        assert outcome_text(decision, by) == want
    for expires, now, want in texts["countdown"]:
        assert countdown_text(expires, now) == want
    for text, want in texts["long"]:
        assert is_long(text) == want, text
    for label, text, want in texts["summary"]:
        assert long_summary(label, text) == want

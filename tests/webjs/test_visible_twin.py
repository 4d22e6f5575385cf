"""The Python twin of the visible rule (``iris.formats.visible``) and of the approval card's
drawn texts (``ApprovalCard.shown``) on the case file ``visible.test.mjs`` reads
(``cases/visible.json``): a command is drawn the same way in the browser, the terminal app,
the chat platforms and ``iris chat``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iris.app.core.approval import ApprovalCard
from iris.formats.visible import CUT, read_back, shown, warning

VISIBLE: dict[str, Any] = json.loads(
    (Path(__file__).parent / "cases" / "visible.json").read_text(encoding="utf-8")
)


def test_a_hidden_character_is_drawn_as_its_code_point_and_the_warning_says_so() -> None:
    for text, want, alarm in VISIBLE["texts"]:
        assert shown(text) == want, repr(text)
        assert warning(text) == alarm, repr(text)
        assert read_back(shown(text)) == text
        assert CUT not in shown(text)


def test_a_card_draws_its_command_and_arguments_the_same_way() -> None:
    for one in VISIBLE["cards"]:
        frame = one["frame"]
        card = ApprovalCard(
            frame["approval_id"],
            frame["index"],
            frame["name"],
            frame["args"],
            frame["preview"],
            frame["expires_at"],
        )
        assert list(card.shown) == one["shown"]

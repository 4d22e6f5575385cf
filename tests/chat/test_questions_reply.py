"""An MCP server's question asked by reply (WhatsApp, Matrix: ``questions.replied``), for any
enum: every choice is listed under its number, and the number shown picks that very choice
(the end-to-end tests are tests/chat/whatsapp/test_elicitation_whatsapp.py and
tests/chat/matrix/test_matrix_elicitation.py)."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from iris.events import ElicitationRequested
from iris.surfaces.chat.platforms.base import ChatPlatform
from iris.surfaces.chat.questions import Asking, question

LABELS = st.lists(
    st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=12).filter(
        lambda s: not s.isdigit()  # a choice named "2" would be ambiguous with a number
    ),
    min_size=1,
    max_size=9,
    unique_by=str.lower,
)


def asking(schema: dict[str, Any]) -> Asking:
    request = ElicitationRequested("elic_1", "fake", "Pick one", schema, 0.0)
    # The platform is not called to render the question.
    return Asking(request, cast(ChatPlatform, None), "chat", {}, "session", "reply")


@given(LABELS, st.data())
def test_every_choice_is_listed_by_its_number_and_that_number_picks_it(
    labels: list[str], data: st.DataObject
) -> None:
    schema = {
        "type": "object",
        "properties": {"pick": {"type": "string", "enum": labels, "title": "Pick"}},
        "required": ["pick"],
    }
    asked = asking(schema)
    prompt = question(asked)
    assert prompt.buttons == (), "asked by reply: no buttons"
    listed = [f"{i}. {label}" for i, label in enumerate(labels, 1)]
    assert "\n".join(listed) in prompt.text
    assert '"decline"' in prompt.text and '"cancel"' in prompt.text
    index = data.draw(st.integers(0, len(labels) - 1))
    answer = asked.filling.give(str(index + 1))
    assert answer is not None and answer.content == {"pick": labels[index]}


@given(LABELS)
def test_a_number_past_the_choices_is_asked_again_with_them_listed(labels: list[str]) -> None:
    schema = {"type": "object", "properties": {"pick": {"enum": labels}}, "required": ["pick"]}
    asked = asking(schema)
    assert asked.filling.give(str(len(labels) + 1)) is None
    again = question(asked).text
    assert "⚠️ must be one of: 1. " in again and "please answer again" in again
    assert f"{len(labels)}. {labels[-1]}" in again

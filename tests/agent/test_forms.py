"""A form filled in one typed answer at a time (``iris.agent.forms``): what the chat platforms
and ``iris chat`` ask with. Fed lists of answers, compared with what reaches the server."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from iris.agent.elicitation import Answer, schema_problem
from iris.agent.forms import Filling, fields, is_confirmation

PAINT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "color": {"type": "string", "enum": ["red", "green", "blue"], "title": "Color"},
        "coats": {"type": "integer", "minimum": 1, "maximum": 5},
        "note": {"type": "string", "maxLength": 10},
        "glossy": {"type": "boolean"},
    },
    "required": ["color", "coats"],
}


def fill(schema: dict[str, Any], *typed: str) -> tuple[Answer | None, list[str]]:
    """Give each line; the answer and the problems said on the way."""
    filling, problems = Filling(schema), []
    for line in typed:
        answer = filling.give(line)
        if filling.problem:
            problems.append(filling.problem)
        if answer is not None:
            return answer, problems
    return None, problems


def test_the_fields_come_in_the_schemas_order_with_enums_as_numbered_choices() -> None:
    color, coats, note, glossy = fields(PAINT)
    assert (color.kind, color.required, color.hint) == ("choice", True, "1. red  2. green  3. blue")
    assert (coats.kind, coats.question) == ("integer", "coats *")
    assert (note.kind, note.required, glossy.hint) == ("text", False, "y/n")
    assert is_confirmation({"properties": {"sure": {"type": "boolean"}}})
    assert is_confirmation({}) and not is_confirmation(PAINT)


def test_a_choice_by_number_or_name_a_wrong_answer_asked_again_optional_left_out() -> None:
    answer, problems = fill(PAINT, "2", "9", "two", "3", "", "yes")
    assert answer == Answer("accept", {"color": "green", "coats": 3, "glossy": True})
    assert problems == ["must be at most 5", "must be a whole number"]
    assert fill(PAINT, "Blue", "1", "far too long a note", "ok", "n")[0] == Answer(
        "accept", {"color": "blue", "coats": 1, "note": "ok", "glossy": False}
    )


def test_an_empty_answer_to_a_required_field_declines() -> None:
    assert fill(PAINT, "red", "")[0] == Answer("decline")
    assert fill({}, "")[0] == Answer("decline")
    assert fill({}, "maybe", "y") == (Answer("accept", {}), ["answer yes or no"])


@given(st.lists(st.text(max_size=8), max_size=12))
def test_whatever_is_typed_an_accepted_answer_fits_the_schema(typed: list[str]) -> None:
    answer, _ = fill(PAINT, *typed)
    if answer is not None and answer.action == "accept":
        assert schema_problem(PAINT, answer.content) is None

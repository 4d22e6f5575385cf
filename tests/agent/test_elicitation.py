"""The elicitation form check (pure): what an answer must be to reach the server."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from iris.agent.elicitation import choices, schema_problem

FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "ok": {"type": "boolean"},
        "color": {"type": "string", "enum": ["red", "green"]},
        "size": {"type": "string", "oneOf": [{"const": "s", "title": "S"}, {"const": "m"}]},
        "mail": {"type": "string", "format": "email"},
    },
    "required": ["name", "ok"],
}

answers = st.fixed_dictionaries(
    {"name": st.text(min_size=1, max_size=20), "ok": st.booleans()},
    optional={
        "age": st.integers(0, 150),
        "color": st.sampled_from(["red", "green"]),
        "size": st.sampled_from(["s", "m"]),
        "mail": st.from_regex(r"[a-z]{1,8}@[a-z]{1,8}\.[a-z]{2,4}", fullmatch=True),
    },
)


@given(answers)
def test_every_answer_that_fits_the_form_is_taken(answer: dict[str, Any]) -> None:
    assert schema_problem(FORM, answer) is None


@given(answers, st.sampled_from(["name", "ok"]))
def test_a_missing_required_field_is_named(answer: dict[str, Any], field: str) -> None:
    del answer[field]
    assert schema_problem(FORM, answer) == f"'{field}' is required"


@given(
    answers,
    st.sampled_from(["age", "ok", "color", "name"]),
    st.one_of(st.none(), st.lists(st.integers())),
)
def test_a_value_of_the_wrong_type_is_refused(answer: dict[str, Any], field: str, bad: Any) -> None:
    answer[field] = bad
    problem = schema_problem(FORM, answer)
    assert problem is not None and problem.startswith(f"'{field}'")


def test_what_is_refused_and_why() -> None:
    base = {"name": "Ada", "ok": True}
    assert schema_problem(FORM, {**base, "color": "blue"}) == "'color' must be one of: red, green"
    assert schema_problem(FORM, {**base, "age": True}) == "'age' must be an integer"
    assert schema_problem(FORM, {**base, "age": 151}) == "'age' must be at most 150"
    assert schema_problem(FORM, {**base, "size": "xl"}) == "'size' must be one of: s, m"
    assert schema_problem(FORM, {**base, "mail": "nope"}) == "'mail' must be an email address"
    assert schema_problem(FORM, {**base, "extra": 1}) == "'extra' is not a field of this form"
    assert schema_problem(FORM, ["not", "an", "object"]) == "the answer must be an object of fields"
    assert choices(FORM["properties"]["size"]) == ["s", "m"]

"""The form of an MCP server's elicitation request, as a person fills it in field by field.

Where a surface has no form of its own (``iris chat``, the chat platforms, the Textual app),
it asks one field at a time: ``fields`` reads them from the request's schema (in its order:
primitives, an enum as choices, the required ones marked), ``read`` turns what the person
typed into the field's value (``yes``/``no`` for a boolean, a number, a choice by its number,
label or value), and ``iris.agent.elicitation.schema_problem`` checks the whole answer before
it is sent. Pure: text in, values out. The twin of ``formFields`` in
``src/iris/web/js/elicitation.js``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from iris.agent.elicitation import Answer, choices, schema_problem

Kind = Literal["boolean", "choice", "integer", "number", "text"]

YES = ("y", "yes", "true", "1", "on")
NO = ("n", "no", "false", "0", "off")


@dataclass(frozen=True, slots=True)
class Choice:
    value: Any
    label: str


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    kind: Kind
    required: bool
    label: str  # the field's title, else its name
    description: str
    choices: tuple[Choice, ...] = ()
    spec: dict[str, Any] = field(default_factory=dict[str, Any], compare=False)

    @property
    def hint(self) -> str:
        """How to answer it: ``y/n``, the numbered choices, or nothing for text."""
        if self.kind == "boolean":
            return "y/n"
        if self.kind == "choice":
            return numbered(self)
        return "a number" if self.kind in ("integer", "number") else ""

    @property
    def question(self) -> str:
        """The line that asks for it: its label, ``*`` when required, its description."""
        mark = " *" if self.required else ""
        about = f" ({self.description})" if self.description else ""
        return f"{self.label}{mark}{about}"


def fields(schema: dict[str, Any]) -> list[Field]:
    """The form's fields, in the schema's order."""
    properties: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    return [
        _field(name, spec, name in required)
        for name, spec in properties.items()
        if isinstance(spec, dict)
    ]


def _field(name: str, spec: dict[str, Any], required: bool) -> Field:
    options = tuple(Choice(v, label) for v, label in _labelled(spec))
    kind: Kind = "text"
    if options:
        kind = "choice"
    elif spec.get("type") in ("boolean", "integer", "number"):
        kind = spec["type"]
    label = str(spec.get("title") or name)
    about = str(spec.get("description") or "")
    return Field(name, kind, required, label, about, options, spec)


def _labelled(spec: dict[str, Any]) -> list[tuple[Any, str]]:
    values = choices(spec)
    names = spec.get("enumNames") if isinstance(spec.get("enumNames"), list) else None
    titles = {
        repr(o["const"]): str(o.get("title") or o["const"])
        for o in spec.get("oneOf") or spec.get("anyOf") or []
        if isinstance(o, dict) and "const" in o
    }
    return [
        (v, str(names[i]) if names and i < len(names) else titles.get(repr(v), str(v)))
        for i, v in enumerate(values)
    ]


def is_confirmation(schema: dict[str, Any]) -> bool:
    """A yes-or-no question: no fields, or one boolean."""
    found = fields(schema)
    return not found or (len(found) == 1 and found[0].kind == "boolean")


class Unreadable(ValueError):
    """What the person typed is not a value of the field; the message says what is."""


def read(field: Field, typed: str) -> Any:
    """The value ``typed`` gives ``field`` (``Unreadable`` when it gives none)."""
    text = typed.strip()
    match field.kind:
        case "boolean":
            return _boolean(text)
        case "choice":
            return _choice(field, text)
        case "integer":
            try:
                return int(text)
            except ValueError:
                raise Unreadable("must be a whole number") from None
        case "number":
            return _number(text)
        case "text":
            return text


def _boolean(text: str) -> bool:
    if text.lower() in YES:
        return True
    if text.lower() in NO:
        return False
    raise Unreadable("answer yes or no")


def _number(text: str) -> int | float:
    try:
        number = float(text)
    except ValueError:
        raise Unreadable("must be a number") from None
    return int(number) if number.is_integer() and "." not in text else number


def _choice(field: Field, text: str) -> Any:
    if text.isdigit() and 1 <= int(text) <= len(field.choices):
        return field.choices[int(text) - 1].value
    for choice in field.choices:
        if text.lower() in (choice.label.lower(), str(choice.value).lower()):
            return choice.value
    listed = ", ".join(f"{i}. {c.label}" for i, c in enumerate(field.choices, 1))
    raise Unreadable(f"must be one of: {listed}")


def numbered(field: Field) -> str:
    """The choices of an enum as the person picks them: ``1. red  2. green``."""
    return "  ".join(f"{i}. {c.label}" for i, c in enumerate(field.choices, 1))


class Filling:
    """One person filling a form in, one typed answer per field (the chat platforms' replies,
    ``iris chat``'s prompt). An answer that cannot be read, or does not fit its field, is asked
    again with the reason (``problem``); an empty answer to a required field declines (to an
    optional one, leaves it out). A form without fields (or a link to open) is a yes or no. ``give`` returns the finished answer, or None while a field
    is left."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.fields = fields(schema)
        self.content: dict[str, Any] = {}
        self.problem = ""
        self._at = 0

    @property
    def current(self) -> Field | None:
        return self.fields[self._at] if self._at < len(self.fields) else None

    def give(self, typed: str) -> Answer | None:
        asked = self.current
        if asked is None:  # no fields (or a link to open): a yes or no
            return self._confirm(typed)
        if not typed.strip():
            if asked.required:
                return Answer("decline")
            return self._next()
        try:
            value = read(asked, typed)
        except Unreadable as exc:
            self.problem = str(exc)
            return None
        problem = schema_problem({"properties": {asked.name: asked.spec}}, {asked.name: value})
        if problem is not None:
            self.problem = problem.removeprefix(f"'{asked.name}' ")
            return None
        self.content[asked.name] = value
        return self._next()

    def _confirm(self, typed: str) -> Answer | None:
        try:
            yes = bool(typed.strip()) and _boolean(typed.strip())
        except Unreadable as exc:
            self.problem = str(exc)
            return None
        self.problem = ""
        return Answer("accept", {}) if yes else Answer("decline")

    def _next(self) -> Answer | None:
        self.problem = ""
        self._at += 1
        return Answer("accept", self.content) if self.current is None else None

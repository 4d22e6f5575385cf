"""Validation of Responses wire objects against the Open Responses specification.

``openresponses-types`` holds pydantic models generated from the specification's openapi.json;
every streamed event and every response object the tests see goes through ``valid_event`` /
``valid_response``, which raise on anything the specification does not allow.

One deliberate mapping: raw reasoning streams as ``response.reasoning_text.delta`` / ``.done``
(the name OpenAI, the openai SDKs and the AI SDK's Open Responses provider use); the
specification's models call the same event, field for field, ``response.reasoning.delta`` /
``.done``. Those two are checked against the specification's models under its name.
"""

from __future__ import annotations

import enum
import typing
from typing import Any

import openresponses_types.types as spec
from pydantic import BaseModel

# Wire name → the specification's name for the same event.
_ALIASES = {
    "response.reasoning_text.delta": "response.reasoning.delta",
    "response.reasoning_text.done": "response.reasoning.done",
}


def _event_models() -> dict[str, type[BaseModel]]:
    models: dict[str, type[BaseModel]] = {}
    for name in dir(spec):
        model = getattr(spec, name)
        if not (
            name.endswith("StreamingEvent")
            and not name.startswith("WebSocket")
            and isinstance(model, type)
            and issubclass(model, BaseModel)
        ):
            continue
        annotation = model.model_fields["type"].annotation
        if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
            values = [member.value for member in annotation]
        else:
            values = list(typing.get_args(annotation))
        for value in values:
            models[str(value)] = model
    return models


EVENT_MODELS = _event_models()


def valid_event(payload: dict[str, Any]) -> BaseModel:
    """Validate one streamed event (a payload dict); return the model it validated as."""
    kind = payload.get("type")
    assert isinstance(kind, str), f"event without a type: {payload!r}"
    spec_kind = _ALIASES.get(kind, kind)
    model = EVENT_MODELS.get(spec_kind)
    assert model is not None, f"{kind!r} is not an Open Responses streaming event"
    parsed = model.model_validate({**payload, "type": spec_kind})
    response = payload.get("response")
    if response is not None:
        valid_response(response)
    return parsed


def valid_events(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for payload in payloads:
        valid_event(payload)
    return payloads


def valid_response(obj: Any) -> spec.ResponseResource:
    """Validate a response object (a dict, or an openai SDK model)."""
    if hasattr(obj, "to_dict"):
        obj = obj.to_dict(exclude_unset=False)
    return spec.ResponseResource.model_validate(obj)

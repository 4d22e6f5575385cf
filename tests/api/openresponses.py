"""Validation of Responses wire objects against the Open Responses specification.

``openresponses-types`` holds pydantic models generated from the specification's openapi.json;
every streamed event and every response object the tests see goes through ``valid_event`` /
``valid_response``, which raise on anything the specification does not allow.

One deliberate mapping: raw reasoning streams as ``response.reasoning_text.delta`` / ``.done``
(the name OpenAI, the openai SDKs and the AI SDK's Open Responses provider use); the
specification's models call the same event, field for field, ``response.reasoning.delta`` /
``.done``. Those two are checked against the specification's models under its name.

The agent's own tool runs (``mcp_call``, ``mcp_list_tools`` items and their events) are
OpenAI's, not in the specification: they are checked against the openai SDK's own models,
strictly, and the rest of the response against the specification.
"""

from __future__ import annotations

import enum
import typing
from typing import Any

import openai.types.responses as openai_types
import openresponses_types.types as spec
from pydantic import BaseModel, TypeAdapter

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

# OpenAI's items and events outside the specification, and the openai SDK's model of each.
OPENAI_ITEMS: dict[str, type[BaseModel]] = {
    "mcp_call": openai_types.response_output_item.McpCall,
    "mcp_list_tools": openai_types.response_output_item.McpListTools,
    "mcp_approval_request": openai_types.response_output_item.McpApprovalRequest,
}
OPENAI_EVENTS: dict[str, type[BaseModel]] = {
    "response.mcp_call.in_progress": openai_types.ResponseMcpCallInProgressEvent,
    "response.mcp_call.completed": openai_types.ResponseMcpCallCompletedEvent,
    "response.mcp_call.failed": openai_types.ResponseMcpCallFailedEvent,
    "response.mcp_call_arguments.delta": openai_types.ResponseMcpCallArgumentsDeltaEvent,
    "response.mcp_call_arguments.done": openai_types.ResponseMcpCallArgumentsDoneEvent,
    "response.mcp_list_tools.in_progress": openai_types.ResponseMcpListToolsInProgressEvent,
    "response.mcp_list_tools.completed": openai_types.ResponseMcpListToolsCompletedEvent,
}


def _openai_item(item: Any) -> bool:
    """Validate ``item`` with the openai SDK's model when it is one of OpenAI's own items."""
    model = OPENAI_ITEMS.get(item.get("type")) if isinstance(item, dict) else None
    if model is None:
        return False
    TypeAdapter(model).validate_python(item, strict=False)
    return True


def valid_event(payload: dict[str, Any]) -> BaseModel:
    """Validate one streamed event (a payload dict); return the model it validated as."""
    kind = payload.get("type")
    assert isinstance(kind, str), f"event without a type: {payload!r}"
    if kind in OPENAI_EVENTS:
        return OPENAI_EVENTS[kind].model_validate(payload)
    if _openai_item(payload.get("item")):
        model = openai_types.ResponseOutputItemAddedEvent
        if kind == "response.output_item.done":
            model = openai_types.ResponseOutputItemDoneEvent
        return model.model_validate(payload)
    spec_kind = _ALIASES.get(kind, kind)
    model = EVENT_MODELS.get(spec_kind)
    assert model is not None, f"{kind!r} is not an Open Responses streaming event"
    response = payload.get("response")
    if response is not None:
        valid_response(response)
        payload = {**payload, "response": _without_openai_items(response)}
    return model.model_validate({**payload, "type": spec_kind})


def valid_events(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for payload in payloads:
        valid_event(payload)
    return payloads


def valid_response(obj: Any) -> spec.ResponseResource:
    """Validate a response object (a dict, or an openai SDK model)."""
    if hasattr(obj, "to_dict"):
        obj = obj.to_dict(exclude_unset=False)
    return spec.ResponseResource.model_validate(_without_openai_items(obj))


def _without_openai_items(response: dict[str, Any]) -> dict[str, Any]:
    """``response`` with OpenAI's own items validated and taken out of its output."""
    output = [item for item in response.get("output") or [] if not _openai_item(item)]
    return {**response, "output": output}

"""What a Chat Completions model takes, learned from its provider's 400s and remembered per model.

OpenAI's reasoning models (o-series, gpt-5) refuse ``max_tokens`` ("Use 'max_completion_tokens'
instead"); older compatible servers refuse ``max_completion_tokens``; a model without reasoning
refuses ``reasoning_effort``, one without the knob ``verbosity``. No list of model names says
which is which for every provider, so the provider's own answer does: a 400 that names one of
these fields as unsupported makes the request go again once with the other limit field (or
without the knob), and the model's later requests are sent that way from the start.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from iris.errors import ProviderHTTPError

LIMIT_FIELDS = ("max_tokens", "max_completion_tokens")
KNOBS = ("reasoning_effort", "verbosity")

# How servers say "this model does not take that field" (OpenAI, Azure, vLLM, llama.cpp);
# an invalid *value* ("Unsupported value", "Invalid value") is the client's to fix.
_REFUSALS = (
    "unsupported parameter",
    "not supported with this model",
    "is not supported",
    "unrecognized request argument",
    "extra inputs are not permitted",
    "unknown parameter",
    "extra_forbidden",
)


@dataclass
class _Learned:
    # Replaced, never changed in place: ``adjust`` runs in the encoding worker thread.
    limit_field: str | None = None  # the limit field this model takes, once one was refused
    dropped: frozenset[str] = frozenset()  # knobs it refused


class ModelQuirks:
    """Per model: which limit field it takes and which knobs it refuses."""

    def __init__(self) -> None:
        self._models: dict[str, _Learned] = {}

    def adjust(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` as this model takes it (the same dict when nothing was learned)."""
        learned = self._models.get(model)
        if learned is None:
            return body
        limit = learned.limit_field
        sent = next((name for name in LIMIT_FIELDS if name in body), None)
        if limit is not None and sent is not None and sent != limit:
            body[limit] = body.pop(sent)
        for knob in learned.dropped:
            body.pop(knob, None)
        return body

    def learn(self, model: str, body: dict[str, Any], error: ProviderHTTPError) -> bool:
        """Whether ``error`` (the answer to ``body``) taught something new about ``model``: then
        the request is worth sending again, adjusted."""
        if error.status_code not in (400, 422):
            return False
        named = _named_fields(error)
        learned = self._models.setdefault(model, _Learned())
        for name in LIMIT_FIELDS:
            # Learned once: a server that refuses both spellings cannot be helped by flipping.
            if name in body and name in named and learned.limit_field is None:
                learned.limit_field = _other(name)
                return True
        for knob in KNOBS:
            if knob in body and knob in named and knob not in learned.dropped:
                learned.dropped = learned.dropped | {knob}
                return True
        if not learned.dropped and learned.limit_field is None:
            del self._models[model]
        return False


def _other(name: str) -> str:
    return LIMIT_FIELDS[1 - LIMIT_FIELDS.index(name)]


def _named_fields(error: ProviderHTTPError) -> set[str]:
    """The fields a refusal names: its ``param``, or the known names its message quotes."""
    try:
        parsed: Any = json.loads(error.body) if error.body else {}
    except ValueError:
        parsed = {}
    detail: Any = parsed.get("error") if isinstance(parsed, dict) else None
    message = str(error)
    param = None
    if isinstance(detail, dict):
        message = str(detail.get("message") or message)
        param = detail.get("param")
    lowered = message.lower()
    if not any(phrase in lowered for phrase in _REFUSALS):
        return set()
    if isinstance(param, str) and param in (*LIMIT_FIELDS, *KNOBS):
        return {param}
    # Without a param: the first known name the message mentions is the refused one (OpenAI
    # goes on to name the field to use instead).
    found = [(lowered.find(name), name) for name in (*LIMIT_FIELDS, *KNOBS) if name in lowered]
    return {min(found)[1]} if found else set()

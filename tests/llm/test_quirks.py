"""What a model refused, read from its provider's 400 in each server's words (``iris.llm.quirks``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iris.errors import ProviderHTTPError
from iris.llm.quirks import ModelQuirks


def refusal(message: str, param: str | None = None, status: int = 400) -> ProviderHTTPError:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param}}
    return ProviderHTTPError(
        status, f"the provider answered HTTP {status}: {message}", json.dumps(body)
    )


@pytest.mark.parametrize(
    ("sent", "error", "now"),
    [
        # OpenAI, a reasoning model
        (
            {"max_tokens": 5},
            refusal(
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "max_tokens",
            ),
            {"max_completion_tokens": 5},
        ),
        # Azure of the time, no param
        (
            {"max_completion_tokens": 5},
            refusal("Unrecognized request argument supplied: max_completion_tokens"),
            {"max_tokens": 5},
        ),
        # vLLM's strict request model (pydantic's words), a 400 without a JSON error body
        (
            {"max_completion_tokens": 5},
            ProviderHTTPError(
                400,
                "the provider answered HTTP 400: [{'type': 'extra_forbidden', 'loc': "
                "('body', 'max_completion_tokens'), 'msg': 'Extra inputs are not permitted'}]",
            ),
            {"max_tokens": 5},
        ),
        # OpenAI, a model without reasoning
        (
            {"reasoning_effort": "low", "max_tokens": 5},
            refusal(
                "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
                "reasoning_effort",
            ),
            {"max_tokens": 5},
        ),
    ],
)
def test_a_refused_field_is_adjusted_for_that_model_only(
    sent: dict[str, object], error: ProviderHTTPError, now: dict[str, object]
) -> None:
    quirks = ModelQuirks()
    assert quirks.learn("m", dict(sent), error) is True
    assert quirks.adjust("m", dict(sent)) == now
    assert quirks.adjust("other", dict(sent)) == sent  # another model keeps its own
    assert quirks.learn("m", now, error) is False  # nothing new: the error is the client's


@pytest.mark.parametrize(
    "error",
    [
        refusal("Invalid value: 'extreme'. Supported values are: 'low'.", "reasoning_effort"),
        refusal("Unsupported value: 'temperature' does not support 0.2.", "temperature"),
        refusal("Rate limit reached", None, status=429),
        refusal("Unsupported parameter: 'max_tokens' is not supported.", "max_tokens", 500),
        refusal("Unsupported parameter: 'top_k' is not supported with this model.", "top_k"),
    ],
)
def test_a_refusal_about_a_value_or_another_field_teaches_nothing(error: ProviderHTTPError) -> None:
    quirks = ModelQuirks()
    sent = {"max_tokens": 5, "reasoning_effort": "extreme", "temperature": 0.2}
    assert quirks.learn("m", dict(sent), error) is False
    assert quirks.adjust("m", dict(sent)) == sent


_FIELDS = ("max_tokens", "max_completion_tokens", "reasoning_effort", "verbosity", "top_k")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_FIELDS), min_size=1, max_size=12))
def test_a_provider_that_refuses_everything_is_asked_again_a_bounded_number_of_times(
    refused: list[str],
) -> None:
    """Each retry needs something new learned: a server that keeps refusing (both limit
    spellings, say) gets at most one retry per field, never a loop."""
    quirks = ModelQuirks()
    body = {"max_tokens": 5, "reasoning_effort": "low", "verbosity": "low", "top_k": 3}
    retries = 0
    for name in refused:
        sent = quirks.adjust("m", dict(body))
        message = f"Unsupported parameter: '{name}' is not supported with this model."
        if quirks.learn("m", sent, refusal(message, name)):
            retries += 1
    assert retries <= 3  # one limit flip, two knobs
    final = quirks.adjust("m", dict(body))
    assert final.get("top_k") == 3  # not a field Iris adjusts
    assert ("max_tokens" in final) != ("max_completion_tokens" in final)

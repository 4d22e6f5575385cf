"""Every event is plain data that survives a JSON round trip."""

from __future__ import annotations

import json

import pytest

from iris import events as ev

SAMPLES: list[ev.Event] = [
    ev.TurnStarted("turn_1", "m"),
    ev.TextDelta("hé 🙂"),
    ev.ReasoningDelta("hmm"),
    ev.Commentary("Let me look."),
    ev.SegmentEnded("Answer"),
    ev.ToolStarted(1, "terminal", {"command": "ls", "nested": {"a": [1, 2]}}, "call_1"),
    ev.ToolProgress(1, "terminal", "file.txt"),
    ev.ToolEnded(1, "terminal", True, 0.4, "file.txt"),
    ev.ToolCallDelta(0, '{"path": "a', "call_1", "write_file"),
    ev.ToolCallDelta(0, '.txt"}'),
    ev.ApprovalRequested(1, "terminal", '{"command": "rm -rf b"}', "rm -rf b", "appr_1", 1.5),
    ev.ApprovalResolved("appr_1", "chat", "phone"),
    ev.ElicitationRequested(
        "elic_1", "files", "Sure?", {"type": "object", "properties": {}}, 1.5, "https://x.test"
    ),
    ev.ElicitationResolved("elic_1", "timeout", "timeout"),
    ev.StreamReset("fallback", "backup"),
    ev.TurnEnded(
        "Answer",
        reasoning="r",
        model="m",
        usage={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
        reason="tool_calls",
        tool_calls=[{"id": "c", "name": "f", "arguments": "{}"}],
        messages=[{"role": "assistant", "content": "Answer"}],
    ),
    ev.TurnFailed("rate_limited", "slow down", True, "partial"),
]


def test_samples_cover_every_event_type() -> None:
    assert {type(s) for s in SAMPLES} == set(ev.Event.__args__)  # type: ignore[attr-defined]


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.kind)
def test_json_round_trip(event: ev.Event) -> None:
    raw = ev.to_json(event)
    assert json.loads(raw)["kind"] == event.kind
    assert ev.from_json(raw) == event
    assert ev.from_dict(json.loads(json.dumps(ev.to_dict(event)))) == event

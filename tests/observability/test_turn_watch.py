"""The turn observer on its own: labels stay bounded whatever a client or model sends, outcomes
are named as documented, nothing is recorded with metrics off, and ids are hashed."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iris.events import TextDelta, ToolEnded, ToolStarted, TurnEnded, TurnFailed, TurnStarted
from iris.observability import metrics, turns
from iris.observability.turns import TurnWatch
from tests.observability.helpers import Scrape

MODELS = ("main", "backup")
TOOLS = ("read_file", "terminal")


@pytest.fixture
def recording() -> Iterator[None]:
    was = metrics.enabled()
    metrics.enable(True)
    try:
        yield
    finally:
        metrics.enable(was)


def now() -> Scrape:
    return Scrape(metrics.render().decode())


def run(watch: TurnWatch, model: str, tool: str, end: TurnEnded | TurnFailed) -> None:
    watch.saw(TurnStarted(watch.turn_id, model))
    watch.saw(TextDelta("a"))
    watch.saw(ToolStarted(1, tool, {}, "call_1"))
    watch.saw(ToolEnded(1, tool, False, 0.01, "no"))
    watch.saw(end)


@settings(max_examples=60, deadline=None)  # a scrape per example: slow on a shared machine
@given(
    surface=st.text(max_size=12),
    platform=st.text(max_size=12),
    model=st.text(max_size=12),
    tool=st.text(max_size=12),
    code=st.text(max_size=60),
)
def test_labels_stay_in_their_bounded_sets(
    surface: str, platform: str, model: str, tool: str, code: str
) -> None:
    metrics.enable(True)
    try:
        # The registry is the process's: what other tests of this worker left is not ours.
        before = now()
        meta = {"surface": surface, "platform": platform, "chat_id": "c", "user_id": "u"}
        watch = TurnWatch("turn_x", meta, MODELS, TOOLS)
        run(watch, model, tool, TurnFailed(code, "m"))
        got = now()
    finally:
        metrics.enable(False)

    def added(name: str, label: str) -> set[str]:
        return got.labels(name, label) - before.labels(name, label)

    assert added("iris_turns_started_total", "surface") <= {*metrics.SURFACES, "other"}
    assert added("iris_turns_started_total", "platform") <= {*metrics.PLATFORMS, ""}
    assert added("iris_turns_started_total", "model") <= {*MODELS, "other"}
    assert added("iris_tool_calls_total", "tool") <= {*TOOLS, "other"}
    for outcome in added("iris_turns_ended_total", "outcome"):
        assert outcome in ("complete", "interrupted") or (
            outcome.startswith("failed:") and len(outcome) <= 47 and outcome.isascii()
        )


def test_outcomes_tokens_and_the_log_line(
    recording: None, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    turns.use_hash_key(tmp_path)
    before = now()
    meta = {"surface": "chat", "platform": "slack", "chat_id": "C123", "user_id": "U9"}
    watch = TurnWatch("turn_a", meta, MODELS, TOOLS)
    with caplog.at_level(logging.INFO, logger="iris.turns"):
        run(watch, "main", "read_file", TurnEnded("hi", model="main", usage={"output_tokens": 4}))
        stopped = TurnWatch("turn_b", {"surface": "api"}, MODELS, TOOLS)
        stopped.saw(TurnStarted("turn_b", "gpt-unknown"))
        stopped.saw(TurnEnded("", model="gpt-unknown", reason="interrupted"))
        failed = TurnWatch("turn_c", {"surface": "iris"}, MODELS, TOOLS)
        failed.saw(TurnStarted("turn_c", "main"))
        failed.saw(TurnFailed("rate_limited", "slow down"))
    got = now()

    def grew(name: str, **labels: str) -> float:
        return got.value(name, **labels) - before.value(name, **labels)

    assert grew("iris_turns_ended_total", surface="chat", outcome="complete") == 1
    assert grew("iris_turns_ended_total", surface="api", model="other", outcome="interrupted") == 1
    assert grew("iris_turns_ended_total", surface="iris", outcome="failed:rate_limited") == 1
    assert grew("iris_tokens_total", surface="chat", model="main", type="output") == 4
    assert grew("iris_tool_calls_total", tool="read_file", outcome="error") == 1
    assert grew("iris_time_to_first_token_seconds_count", surface="chat") == 1
    assert grew("iris_time_to_first_token_seconds_count", surface="api") == 0  # no text came
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "iris.turns"]
    assert [line["outcome"] for line in lines] == ["complete", "interrupted", "failed:rate_limited"]
    first = lines[0]
    assert first["platform"] == "slack" and first["tool_calls"] == 1 and first["output_tokens"] == 4
    assert first["chat"] == turns.hashed("C123") and "C123" not in json.dumps(lines)
    # The key lives beside the store: another process hashes the same chat alike.
    key = (tmp_path / turns.KEY_FILE).read_bytes()
    assert len(key) == 32 and (tmp_path / turns.KEY_FILE).stat().st_mode & 0o077 == 0
    turns.use_hash_key(tmp_path)
    assert turns.hashed("C123") == first["chat"]


def test_nothing_is_recorded_with_metrics_off(caplog: pytest.LogCaptureFixture) -> None:
    metrics.enable(False)
    before = now().text
    with caplog.at_level(logging.INFO, logger="iris.turns"):
        run(
            TurnWatch("turn_d", {"surface": "api"}, MODELS, TOOLS),
            "main",
            "terminal",
            TurnEnded(""),
        )
    metrics.frame_sent("message.stop", "{}")
    metrics.chat_rate_limited("telegram", "chat")
    after = now().text

    def series(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("iris_")]

    assert series(after) == series(before)
    assert any('"turn_id": "turn_d"' in r.getMessage() for r in caplog.records)  # still logged


def test_store_failures_and_frame_bytes_are_counted(recording: None) -> None:
    import redis

    from iris.errors import StoreUnavailable
    from iris.state.redis_store import translated

    before = now()
    with pytest.raises(StoreUnavailable), translated("redis://127.0.0.1:1/0"):
        raise redis.ConnectionError("refused")
    metrics.frame_sent("message.update", '{"text":"é"}')  # 13 UTF-8 bytes, 12 characters
    got = now()
    assert got.value("iris_store_errors_total") - before.value("iris_store_errors_total") == 1
    sent = "iris_socket_bytes_sent_total"
    assert got.value(sent, kind="message.update") - before.value(sent, kind="message.update") == 13

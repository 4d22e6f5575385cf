"""``iris chat -q``: the real binary against the fake upstream, as a user runs it."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iris.events import (
    Event,
    SegmentEnded,
    StreamReset,
    TextDelta,
    TurnEnded,
    TurnStarted,
)
from iris.surfaces.cli.oneshot import Printer
from tests.fakes.upstream import FakeUpstream, error, gated, reasoning, text, tool_call

pytestmark = pytest.mark.timeout(30)


def iris(*args: str, env: dict[str, str], **kw: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "iris.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def env(upstream: FakeUpstream) -> dict[str, str]:
    return {
        **os.environ,
        "OPENAI_BASE_URL": upstream.base_url,
        "OPENAI_API_KEY": "sk-test",
        "IRIS_MODEL": "fake-model",
        "IRIS_STREAMING_ENABLED": "true",
    }


def test_streams_each_delta_as_it_arrives(upstream: FakeUpstream, env: dict[str, str]) -> None:
    upstream.script(gated("Hel", "lo", " world", after=1))
    proc = iris("chat", "-q", "hi", env=env)
    assert proc.stdout is not None
    first = proc.stdout.read1(100)  # returns as soon as the first delta was flushed
    assert first == b"Hel"
    assert not upstream.finished.is_set()
    upstream.release()
    out, err = proc.communicate(timeout=20)
    assert first + out == b"Hello world\n"
    assert proc.returncode == 0, err


def test_streaming_off_prints_the_whole_reply(
    upstream: FakeUpstream, env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("streaming:\n  enabled: true\n  cli: false\n")
    upstream.script(text("Hel", "lo"))
    proc = iris("chat", "-q", "hi", "--config", str(config), env=env)
    out, err = proc.communicate(timeout=20)
    assert out == b"Hello\n" and proc.returncode == 0, err
    assert upstream.requests[0].stream is False


def test_reasoning_goes_to_stderr_only(
    upstream: FakeUpstream, env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("display:\n  show_reasoning: true\n")
    upstream.script(reasoning(["pondering"], ["Answer"]))
    proc = iris("chat", "-q", "hi", "--config", str(config), env=env)
    out, err = proc.communicate(timeout=20)
    assert out == b"Answer\n"
    assert b"pondering" in err


def test_tool_activity_goes_to_stderr(
    upstream: FakeUpstream, env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("tools:\n  approval: {mode: 'off'}\n")
    upstream.script(
        tool_call("terminal", ['{"command": "echo hi"}'], content="Checking."), text("Done.")
    )
    proc = iris("chat", "-q", "hi", "--config", str(config), env=env)
    out, err = proc.communicate(timeout=20)
    assert out == b"Checking.\n\nDone.\n", err
    assert '┊ ⚡ terminal: "echo hi"' in err.decode() and "✓" in err.decode()


def test_a_one_shot_asks_nobody_so_a_tool_that_asks_is_refused(
    upstream: FakeUpstream, env: dict[str, str], tmp_path: Path
) -> None:
    upstream.script(tool_call("terminal", ['{"command": "touch ran"}']), text("Refused."))
    proc = iris("chat", "-q", "hi", env=env)
    out, err = proc.communicate(timeout=20)
    assert out == b"Refused.\n", err
    assert not list(tmp_path.rglob("ran"))  # in no workspace, nowhere
    told = upstream.requests[1].body["messages"][-1]["content"]
    assert told.startswith("not approved") and "nobody can be asked here" in told


def _one_line_failure(proc: subprocess.Popen[bytes]) -> str:
    out, err = proc.communicate(timeout=20)
    assert proc.returncode not in (0, None)
    message = err.decode()
    assert "Traceback" not in message
    assert len(message.strip().splitlines()) == 1, message
    assert out == b""
    return message


def test_unknown_config_key_is_one_line(env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("streaming:\n  enabeld: true\n")
    message = _one_line_failure(iris("chat", "-q", "hi", "--config", str(config), env=env))
    assert "streaming.enabeld" in message


def test_wrong_type_is_one_line(env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("streaming:\n  edit_interval: soon\n")
    message = _one_line_failure(iris("chat", "-q", "hi", "--config", str(config), env=env))
    assert "streaming.edit_interval" in message


def test_unreachable_base_url_is_one_line(env: dict[str, str]) -> None:
    env = {**env, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    message = _one_line_failure(iris("chat", "-q", "hi", env=env))
    assert "cannot reach the provider" in message


def test_provider_401_is_one_line(upstream: FakeUpstream, env: dict[str, str]) -> None:
    upstream.script(error(401, "invalid api key"))
    message = _one_line_failure(iris("chat", "-q", "hi", env=env))
    assert "401" in message


# -- the printer alone: what the segment model fixed (each failed before it consumed it) -------


def printed(events: list[Event], *, stream: bool = True) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    printer = Printer(out, err, stream=stream, show_reasoning=False)
    for event in events:
        printer.handle(event)
    return out.getvalue(), err.getvalue()


def test_a_replay_that_repeats_the_printed_text_is_printed_once() -> None:
    out, err = printed(
        [
            TurnStarted("t", "m"),
            TextDelta("Hello wor"),
            StreamReset("falling back to b", "b"),
            TextDelta("Hello world"),
            SegmentEnded("Hello world"),
            TurnEnded("Hello world"),
        ]
    )
    assert out == "Hello world\n" and "restarts" not in err


def test_a_diverging_replay_is_printed_whole_on_a_new_line() -> None:
    out, err = printed(
        [
            TurnStarted("t", "m"),
            TextDelta("Hello wor"),
            StreamReset("falling back to b", "b"),
            TextDelta("Hi!"),
            SegmentEnded("Hi!"),
            TurnEnded("Hi!"),
        ]
    )
    assert out == "Hello wor\nHi!\n"
    assert err == "iris: falling back to b; the answer restarts\n"


def test_text_the_agent_held_back_reaches_stdout() -> None:
    events: list[Event] = [
        TurnStarted("t", "m"),
        TextDelta("Hi"),
        SegmentEnded("Hi there"),
        TurnEnded("Hi there"),
    ]
    assert printed(events) == ("Hi there\n", "")
    assert printed(events, stream=False) == ("Hi there\n", "")

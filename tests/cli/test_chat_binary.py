"""The real ``iris chat`` binary: piped (no terminal) and, when tmux is there, in a real pty."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fakes.upstream import FakeUpstream, hold, text, tool_call

IRIS = [sys.executable, "-m", "iris.cli"]


def write_config(tmp_path: Path, up: FakeUpstream) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"model: {{base_url: '{up.base_url}', name: fake-model, api_key: sk-test}}\n"
        "streaming: {cli: true}\n"
        f"store: {{path: '{tmp_path / 'iris.db'}'}}\n"
        "tools: {approval: {mode: 'off'}}\n"
    )
    return config


def test_piped_chat_prints_plain_text(tmp_path: Path, upstream: FakeUpstream) -> None:
    upstream.script(
        tool_call("terminal", ['{"command": "echo x"}'], content="Looking."),
        text("Here **it** is.", delay=0.01),
        text("Second."),
    )
    config = write_config(tmp_path, upstream)
    done = subprocess.run(
        [*IRIS, "chat", "--config", str(config)],
        input="first question\nsecond \\\nquestion\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("Looking.") and "/help for commands" in done.stderr
    assert "\x1b" not in out and not any(ch in out for ch in "╭╰─┄")
    assert out.index("Looking.") < out.index("⚡ terminal") < out.index("Here **it** is.\n")
    assert out.rstrip().endswith("fake-model · 10 in · 5 out tokens")
    assert upstream.requests[-1].body["messages"][-1]["content"] == "second \nquestion"


class Tmux:
    """One private tmux server running one pane."""

    def __init__(self, command: str, width: int = 90) -> None:
        self.socket = f"iris-test-{uuid.uuid4().hex[:8]}"
        self._tmux("new-session", "-d", "-x", str(width), "-y", "40", command)

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10
        )
        return done.stdout

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", *keys)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-J")

    def wait_for(self, check: Callable[[str], bool], within: float = 20.0) -> str:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            shown = self.screen()
            if check(shown):
                return shown
            time.sleep(0.05)  # polling a pane: tmux has no change notification
        raise AssertionError(f"the pane never showed what was expected:\n{self.screen()}")

    def close(self) -> None:
        self._tmux("kill-server")


@pytest.fixture
def tmux() -> Iterator[Callable[[str], Tmux]]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install tmux)")
    started: list[Tmux] = []

    def start(command: str) -> Tmux:
        started.append(Tmux(command))
        return started[-1]

    yield start
    for pane in started:
        pane.close()


def test_chat_in_a_real_terminal(
    tmp_path: Path, upstream: FakeUpstream, tmux: Callable[[str], Tmux]
) -> None:
    upstream.script(text("Hello ", "**there**.", "\n- one\n- two", delay=0.01), hold("Partial"))
    config = write_config(tmp_path, upstream)
    iris = " ".join(IRIS)
    pane = tmux(f"HOME={tmp_path} {iris} chat --config {config}; echo EXIT=$?; read")
    pane.wait_for(lambda s: "/help for commands" in s)
    pane.keys("hello", "Enter")
    shown = pane.wait_for(lambda s: "out tokens" in s)
    assert shown.index("╭─ Iris") < shown.index("Hello there.") < shown.index("• two")
    assert shown.index("• two") < shown.index("╰─") < shown.index("fake-model · 10 in")
    pane.keys("wait", "Enter")
    pane.wait_for(lambda s: "Partial" in s and "Ctrl-C to interrupt" in s)
    pane.keys("C-c")
    assert upstream.disconnected.wait(2.0)
    shown = pane.wait_for(lambda s: "⏹ interrupted" in s)
    assert shown.rindex("Partial") < shown.rindex("╰─") < shown.index("⏹ interrupted")
    pane.keys("C-d")
    pane.wait_for(lambda s: "EXIT=0" in s)

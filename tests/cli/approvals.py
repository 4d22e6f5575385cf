"""Approval prompts on the REPL's terminal: a tool that asks, its call and what ran, for the REPL's approval tests."""

from __future__ import annotations

from pathlib import Path

from tests.cli.repl_session import streaming
from tests.conftest import MakeConfig, shared_workspace
from tests.fakes.upstream import FakeUpstream, tool_call


def asking(make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path, timeout: float = 30):
    return streaming(
        make_config,
        upstream,
        tools={
            "terminal": shared_workspace(tmp_path),
            "approval": {"mode": "ask", "timeout": timeout},
        },
    )


def call(command: str = "echo ran >> runs.txt"):
    return tool_call("terminal", [f'{{"command": "{command}"}}'], content="Checking.")


def runs(tmp_path: Path) -> int:
    marker = tmp_path / "ws" / "runs.txt"
    return marker.read_text().count("ran") if marker.exists() else 0

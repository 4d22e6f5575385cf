"""Findings 1 and 7 of the hardening review, replayed against the real ``iris serve``: a model
that calls tools it was not offered, tools that reach for secrets, files readable by others."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI

from tests.adversarial.conftest import StartServed
from tests.conftest import anywhere
from tests.fakes.upstream import FakeUpstream, text, tool_call, tool_calls

pytestmark = pytest.mark.timeout(60)

KEY = "sk-iris-adversarial"
USER = [{"role": "user", "content": "hi"}]


def client(url: str) -> OpenAI:
    return OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=20)


def tool_messages(upstream: FakeUpstream, request: int) -> list[str]:
    """The tool results Iris sent back to the model in its ``request``-th request."""
    messages: list[dict[str, Any]] = upstream.requests[request].body["messages"]
    return [m["content"] for m in messages if m["role"] == "tool"]


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# -- finding 1: tools that were switched off still ran ------------------------------------------


def test_tool_choice_none_the_models_terminal_call_does_not_run(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = served(
        platforms={"api_server": {"api_key": KEY}, "iris": {"enabled": False}},
        tools={"terminal": {"cwd": str(tmp_path)}},
    )
    upstream.script(tool_call("terminal", [json.dumps({"command": "touch pwned"})]), text("ok"))
    with client(url) as api:
        reply = api.chat.completions.create(model="iris-agent", messages=USER, tool_choice="none")
    assert upstream.requests[0].body.get("tools") in (None, [])
    assert not anywhere(tmp_path, "pwned")
    assert reply.choices[0].message.content == "ok"
    assert "not offered" in tool_messages(upstream, 1)[0]


def test_tool_choice_none_on_responses_does_not_run_either(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = served(
        platforms={"api_server": {"api_key": KEY}, "iris": {"enabled": False}},
        tools={"terminal": {"cwd": str(tmp_path)}},
    )
    upstream.script(tool_call("terminal", [json.dumps({"command": "touch pwned"})]), text("ok"))
    with client(url) as api:
        response = api.responses.create(model="iris-agent", input="hi", tool_choice="none")
    assert not anywhere(tmp_path, "pwned")
    assert response.output_text == "ok"


def test_agent_tools_off_the_models_terminal_call_does_not_run(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = served(
        platforms={
            "api_server": {"api_key": KEY, "agent_tools": "never"},
            "iris": {"enabled": False},
        },
        tools={"terminal": {"cwd": str(tmp_path)}},
    )
    upstream.script(tool_call("terminal", [json.dumps({"command": "touch pwned"})]), text("ok"))
    with client(url) as api:
        chunks = list(api.chat.completions.create(model="fake-model", messages=USER, stream=True))
    assert upstream.requests[0].body.get("tools") in (None, [])
    assert not anywhere(tmp_path, "pwned")
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "ok"


# -- finding 7: what tools can reach ------------------------------------------------------------


def test_read_file_refuses_secrets_outside_its_root_and_iris_own_files(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "passwd-link").symlink_to("/etc/passwd")
    os.mkfifo(work / "pipe")
    # The served config lives in tmp_path: a root that holds it still does not expose it.
    _, url = served(
        platforms={"api_server": {"api_key": KEY}, "iris": {"enabled": False}},
        tools={"terminal": {"cwd": str(work)}, "read_file": {"roots": [str(tmp_path)]}},
    )
    paths = [
        "/etc/shadow",
        "/proc/self/environ",
        str(tmp_path / "config.yaml"),
        "passwd-link",
        "pipe",  # nobody writes to it: a blocking open would hang the worker thread
    ]
    calls = [("read_file", [json.dumps({"path": p})], f"call_{n}") for n, p in enumerate(paths)]
    upstream.script(tool_calls(calls), text("ok"))
    with client(url) as api:
        reply = api.chat.completions.create(model="iris-agent", messages=USER)
    assert reply.choices[0].message.content == "ok"
    results = tool_messages(upstream, 1)
    assert len(results) == len(paths)
    for path, result in zip(paths, results, strict=True):
        assert result.startswith(f"error: cannot read {path}"), result
        assert "root:" not in result and "api_key" not in result


def test_terminal_commands_never_see_the_servers_keys(
    served: StartServed,
    upstream: FakeUpstream,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-secret")
    monkeypatch.setenv("IRIS_STREAMING_ENABLED", "true")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-server-secret")
    _, url = served(
        platforms={"api_server": {"api_key": KEY}, "iris": {"enabled": False}},
        tools={"terminal": {"cwd": str(tmp_path)}},
    )
    upstream.script(tool_call("terminal", ['{"command": "env"}']), text("ok"))
    with client(url) as api:
        api.chat.completions.create(model="iris-agent", messages=USER)
    (result,) = tool_messages(upstream, 1)
    assert "PATH=" in result
    for secret in ("sk-server-secret", "ghp-server-secret", "IRIS_STREAMING_ENABLED", KEY):
        assert secret not in result


def test_the_store_and_iris_home_are_private_after_start(
    served: StartServed, isolated_home: Path, tmp_path: Path
) -> None:
    # An older Iris left these readable by everyone.
    home = isolated_home / ".iris"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    (home / "app.json").write_text('{"token": "device-secret"}')
    (home / "app.json").chmod(0o644)
    server, _ = served(platforms={"api_server": {"api_key": KEY}, "iris": {"enabled": False}})
    database = tmp_path / "iris.db"
    for path in (database, Path(f"{database}-wal"), Path(f"{database}-shm")):
        if path.exists() or path == database:
            assert mode(path) == 0o600, path
    assert mode(tmp_path / "config.yaml") == 0o600
    assert mode(home) == 0o700
    assert mode(home / "app.json") == 0o600
    warnings = [line for line in server.drain() if "made private" in line]
    assert len(warnings) == 1
    for path in (home, home / "app.json", tmp_path / "config.yaml"):
        assert str(path) in warnings[0]

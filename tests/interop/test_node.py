"""openai-node and the Vercel AI SDK against Iris on the first-run config.

Each case runs ``node tests/interop/node/<script>.mjs <case>`` against the server and checks
the JSON line it prints. The packages are pinned in ``node/package.json`` (installed by
``npm ci`` there), Node 22 among them; the tests skip only when no ``node`` is found at all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import IrisServer
from tests.fakes.upstream import FakeUpstream, Scenario, text, tool_call
from tests.interop.conftest import StartIris, upstream_bodies

SCRIPTS = Path(__file__).parent / "node"
# The AI SDK 7 needs Node 22 or newer: ``npm ci`` there installs one (the npm package ``node``,
# a devDependency), used before any ``node`` on PATH (Debian 12 has 20).
PACKAGED_NODE = SCRIPTS / "node_modules" / ".bin" / "node"
NODE = str(PACKAGED_NODE) if PACKAGED_NODE.exists() else shutil.which("node")

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(NODE is None, reason="node is not installed"),
]


def hello() -> list[Scenario]:
    return [text("Hel", "lo")]


def weather() -> list[Scenario]:
    return [
        tool_call("get_weather", ['{"city":', '"Paris"}'], call_id="call_w"),
        text("Sunny, ", "21 °C."),
    ]


def reasoned_weather() -> list[Scenario]:
    return [
        tool_call(
            "get_weather",
            ['{"city":', '"Paris"}'],
            call_id="call_w",
            reasoning=["Need the ", "weather."],
        ),
        text("Sunny, ", "21 °C."),
    ]


def two_turns() -> list[Scenario]:
    return [text("Hi Ada."), text("You are Ada.")]


@dataclass(frozen=True)
class Case:
    script: str
    name: str
    scenarios: Any  # () -> list[Scenario]
    expected: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.script}:{self.name}"


WEATHER_CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}

CASES = [
    Case("openai_node", "chat-create", hello, {"object": "chat.completion", "text": "Hello"}),
    Case("openai_node", "chat-stream", hello, {"deltas": ["Hel", "lo"]}),
    Case("openai_node", "chat-tools", weather, {"call": WEATHER_CALL, "text": "Sunny, 21 °C."}),
    Case(
        "openai_node",
        "responses-create",
        hello,
        {"object": "response", "status": "completed", "text": "Hello"},
    ),
    Case(
        "openai_node",
        "responses-stream",
        hello,
        {"deltas": ["Hel", "lo"], "last": "response.completed"},
    ),
    Case(
        "openai_node", "responses-tools", weather, {"call": WEATHER_CALL, "text": "Sunny, 21 °C."}
    ),
]
CASES.append(
    Case(
        "openai_node",
        "conversations",
        two_turns,
        {
            "conversation": True,
            "texts": ["Hi Ada.", "You are Ada."],
            "items": ["user", "user", "assistant", "user", "assistant"],
            "deleted": True,
        },
    )
)
CASES += [
    Case("ai_sdk", "responses-generate", hello, {"text": "Hello", "finishReason": "stop"}),
    Case("ai_sdk", "responses-stream", hello, {"deltas": ["Hel", "lo"], "finishReason": "stop"}),
    Case(
        "ai_sdk",
        "responses-tools",
        weather,
        {"cities": ["Paris"], "text": "Sunny, 21 °C.", "steps": 2},
    ),
    Case(
        "ai_sdk",
        "responses-second-turn",
        two_turns,
        {"first": "Hi Ada.", "second": "You are Ada."},
    ),
    Case("agents", "run", hello, {"text": "Hello"}),
    Case(
        "agents",
        "conversation",
        two_turns,
        {"texts": ["Hi Ada.", "You are Ada."], "items": ["user", "assistant", "user", "assistant"]},
    ),
    Case(
        "ai_sdk",
        "openai-conversation",
        two_turns,
        {
            "first": "Hi Ada.",
            "second": "You are Ada.",
            "items": ["user", "assistant", "user", "assistant"],
        },
    ),
]
for provider in ("openai", "compatible"):
    CASES += [
        Case("ai_sdk", f"{provider}-generate", hello, {"text": "Hello", "finishReason": "stop"}),
        Case(
            "ai_sdk",
            f"{provider}-stream",
            hello,
            {"deltas": ["Hel", "lo"], "finishReason": "stop"},
        ),
        Case(
            "ai_sdk",
            f"{provider}-tools",
            weather,
            {"cities": ["Paris"], "text": "Sunny, 21 °C.", "steps": 2},
        ),
        Case(
            "ai_sdk",
            f"{provider}-stream-tools",
            weather,
            {"cities": ["Paris"], "deltas": ["Sunny, ", "21 °C."], "steps": 2},
        ),
        Case(
            "ai_sdk",
            f"{provider}-reasoning-tools",
            reasoned_weather,
            {"cities": ["Paris"], "reasoned": True, "text": "Sunny, 21 °C."}
            | ({"reasoning": "Need the weather."} if provider == "compatible" else {}),
        ),
        Case(
            "ai_sdk",
            f"{provider}-second-turn",
            two_turns,
            {"first": "Hi Ada.", "second": "You are Ada."},
        ),
    ]


def run_case(iris: IrisServer, case: Case) -> dict[str, Any]:
    assert NODE is not None
    assert (SCRIPTS / "node_modules").is_dir(), (
        "the node packages are not installed: run `npm ci` in tests/interop/node (.ci/run does)"
    )
    done = subprocess.run(
        [NODE, f"{case.script}.mjs", case.name],
        cwd=SCRIPTS,
        env={**os.environ, "IRIS_BASE_URL": iris.base_url},
        capture_output=True,
        text=True,
        timeout=45,
    )
    # An SDK error may quote a whole SSE body; the head says what failed.
    assert done.returncode == 0, f"{case.id} failed:\n{done.stderr[:3000]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def text_of(content: Any) -> str:
    """A chat message's content as plain text (a string or a list of text parts)."""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return content or ""


def node_process(iris: IrisServer, script: str, name: str) -> subprocess.Popen[str]:
    assert NODE is not None
    assert (SCRIPTS / "node_modules").is_dir(), (
        "the node packages are not installed: run `npm ci` in tests/interop/node (.ci/run does)"
    )
    return subprocess.Popen(
        [NODE, f"{script}.mjs", name],
        cwd=SCRIPTS,
        env={**os.environ, "IRIS_BASE_URL": iris.base_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def first_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The first line the process prints, within ``timeout`` seconds (else the test fails)."""
    assert process.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()))  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    if not lines:
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"nothing printed within {timeout} s:\n{err[:3000]}")
    return lines[0]


def held_call() -> list[Scenario]:
    """The call's head and first fragment, then the model waits for the test."""
    return [tool_call("get_weather", ['{"city":', '"Paris"}'], call_id="call_w", gate_after=1)]


def held_call_then_answer() -> list[Scenario]:
    return [*held_call(), text("Sunny, ", "21 °C.")]


PARIS = {"city": "Paris"}
STREAMED_CALLS = [
    Case(
        "openai_node",
        "chat-tool-stream",
        held_call,
        {"heads": [[0, "call_w", "get_weather"]], "arguments": PARIS, "finish": "tool_calls"},
    ),
    Case(
        "openai_node",
        "responses-tool-stream",
        held_call,
        {"deltas": ['{"city":', '"Paris"}'], "call": ["call_w", "get_weather", PARIS]},
    ),
    *(
        Case(
            "ai_sdk",
            f"{provider}-tool-stream",
            held_call,
            {"started": "get_weather", "arguments": PARIS, "input": PARIS},
        )
        # @ai-sdk/open-responses 2.0 reports a call only at its output_item.done (it has no
        # tool-input-delta parts), so it has no case here.
        for provider in ("openai", "compatible")
    ),
    Case(
        "agents",
        "tool-stream",
        held_call_then_answer,
        {"cities": ["Paris"], "text": "Sunny, 21 °C."},
    ),
]


@pytest.mark.parametrize("case", STREAMED_CALLS, ids=[case.id for case in STREAMED_CALLS])
def test_a_node_client_sees_a_tool_call_before_the_model_finished_it(
    upstream: FakeUpstream, iris: IrisServer, case: Case
) -> None:
    upstream.script(*case.scenarios())
    process = node_process(iris, case.script, case.name)
    try:
        line = first_line(process, timeout=20)
        assert json.loads(line) == {"fragment": '{"city":'}
        assert not upstream.finished.is_set(), "the fragment waited for the model to finish"
    finally:
        upstream.release()
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, f"{case.id} failed:\n{err[:3000]}"
    assert json.loads(out.strip().splitlines()[-1]) == case.expected


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_node_client(upstream: FakeUpstream, iris: IrisServer, case: Case) -> None:
    upstream.script(*case.scenarios())
    assert run_case(iris, case) == case.expected
    bodies = upstream_bodies(upstream)
    assert len(bodies) == len(case.scenarios())
    if case.scenarios in (weather, reasoned_weather):
        last = bodies[1]["messages"][-1]
        assert last["role"] == "tool" and last["tool_call_id"] == "call_w"
    if case.scenarios is two_turns:
        said = [text_of(m.get("content")) for m in bodies[1]["messages"]]
        # The conversations case says "Hi!" first; the history comes from the conversation.
        greeting = ["Hi!"] if case.name == "conversations" else []
        assert said[-3 - len(greeting) :] == [
            "My name is Ada.",
            *greeting,
            "Hi Ada.",
            "What is my name?",
        ]


def test_the_ai_sdk_sees_the_agents_own_tool_runs(
    upstream: FakeUpstream, start_iris: StartIris, tmp_path: Path
) -> None:
    """``iris-agent``'s tool runs are ``mcp_call`` items: the AI SDK shows each as a tool call
    the provider ran and its result, and the answer as before."""
    (tmp_path / "notes.txt").write_text("buy milk")
    server = start_iris(
        tools={"enabled": ["read_file"], "terminal": {"cwd": str(tmp_path)}},
        platforms={"api_server": {"api_key": "sk-agent"}},
    )
    upstream.script(
        tool_call("read_file", ['{"path": "notes.txt"}'], content="Reading."),
        text("They say: buy milk."),
    )
    assert NODE is not None
    done = subprocess.run(
        [NODE, "ai_sdk.mjs", "openai-agent"],
        cwd=SCRIPTS,
        env={**os.environ, "IRIS_BASE_URL": server.base_url, "IRIS_API_KEY": "sk-agent"},
        capture_output=True,
        text=True,
        timeout=45,
    )
    assert done.returncode == 0, done.stderr[:3000]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["text"] == "Reading.They say: buy milk."
    assert seen["finishReason"] == "stop"
    assert seen["tools"] == [
        ["call", "mcp.read_file", True],
        ["result", "mcp.read_file", "buy milk"],
    ]

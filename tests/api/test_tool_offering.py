"""Through the API, tools that were switched off never run, whatever the model answers
(issue 10, finding 1): ``tool_choice: "none"`` and ``platforms.api_server.agent_tools: never``."""

from __future__ import annotations

from pathlib import Path

import pytest
from openai import BadRequestError, OpenAI

from tests.api.conftest import StartIris
from tests.conftest import anywhere
from tests.fakes.upstream import FakeUpstream, text, tool_call, tool_calls

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "hi"}]
KEY = "sk-iris-test"


def touch(tmp_path: Path) -> str:
    return '{"command": "touch pwned"}'


def test_tool_choice_none_never_runs_a_tool(
    upstream: FakeUpstream, iris_server: StartIris, tmp_path: Path
) -> None:
    server = iris_server(
        platforms={"api_server": {"api_key": KEY}}, tools={"terminal": {"cwd": str(tmp_path)}}
    )
    upstream.script(tool_call("terminal", [touch(tmp_path)]), text("done"))
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as client:
        reply = client.chat.completions.create(
            model="iris-agent", messages=USER, tool_choice="none"
        )
    assert upstream.requests[0].body.get("tools") in (None, [])
    assert not anywhere(tmp_path, "pwned")
    assert reply.choices[0].message.content == "done"
    refusal = upstream.requests[1].body["messages"][-1]
    assert refusal["role"] == "tool" and "not offered" in refusal["content"]


def test_agent_tools_off_never_runs_a_tool(
    upstream: FakeUpstream, iris_server: StartIris, tmp_path: Path
) -> None:
    server = iris_server(
        platforms={"api_server": {"api_key": KEY, "agent_tools": "never"}},
        tools={"terminal": {"cwd": str(tmp_path)}},
    )
    upstream.script(tool_call("terminal", [touch(tmp_path)]), text("done"))
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as client:
        chunks = list(
            client.chat.completions.create(model="fake-model", messages=USER, stream=True)
        )
    assert upstream.requests[0].body.get("tools") in (None, [])
    assert not anywhere(tmp_path, "pwned")
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "done"


def test_max_tool_calls_bounds_the_tools_a_response_runs(
    upstream: FakeUpstream, iris_server: StartIris, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("first file")
    server = iris_server(
        platforms={"api_server": {"api_key": KEY}},
        tools={"enabled": ["read_file"], "terminal": {"cwd": str(tmp_path)}},
    )
    reads = [("read_file", ['{"path": "a.txt"}']), ("read_file", ['{"path": "a.txt"}'])]
    upstream.script(tool_calls(reads), text("done"))
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as client:
        response = client.responses.create(model="iris-agent", input="read", max_tool_calls=1)
    assert response.max_tool_calls == 1 and response.output_text == "done"
    answers = [m for m in upstream.requests[1].body["messages"] if m["role"] == "tool"]
    assert answers[0]["content"] == "first file"
    assert "max_tool_calls (1) reached" in answers[1]["content"]
    assert upstream.requests[1].body.get("tools") in (None, [])  # nothing more on offer


def test_truncation_other_than_disabled_is_refused(iris_server: StartIris) -> None:
    server = iris_server(platforms={"api_server": {"api_key": KEY}})
    with (
        OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as client,
        pytest.raises(BadRequestError) as refused,
    ):
        client.responses.create(model="fake-model", input="hi", truncation="auto")
    assert refused.value.code == "unsupported_parameter" and refused.value.param == "truncation"

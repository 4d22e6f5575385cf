"""MCP servers under the real ``iris serve``: only its config defines them (a request cannot
add one), their tools follow today's offering rules (a key-less API caller gets none), and a
stdio child never sees the server's keys."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import openai
import pytest
from openai import OpenAI

from tests.adversarial.conftest import StartServed
from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(60)

KEY = "sk-iris-adversarial"
USER = [{"role": "user", "content": "hi"}]


def offered(upstream: FakeUpstream, n: int) -> list[str]:
    return [t["function"]["name"] for t in upstream.requests[n].body.get("tools") or []]


def tool_message(upstream: FakeUpstream, n: int) -> str:
    return next(m for m in upstream.requests[n].body["messages"] if m["role"] == "tool")["content"]


def test_iris_serve_starts_the_server_and_its_child_sees_no_provider_key(
    served: StartServed, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-secret")
    # The startup completes once each server connected (or failed once).
    _, url = served(platforms={"api_server": {"api_key": KEY}}, mcp_servers={"fake": stdio()})
    upstream.script(tool_call("mcp_fake_env", [json.dumps({"name": "OPENAI_API_KEY"})]), text("ok"))
    with OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=20) as api:
        reply = api.chat.completions.create(model="iris-agent", messages=USER)
    assert reply.choices[0].message.content == "ok"
    assert "mcp_fake_env" in offered(upstream, 0)
    assert tool_message(upstream, 1) == "<unset>"


def test_a_keyless_api_caller_gets_no_mcp_tools_and_a_call_to_one_does_not_run(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = served(mcp_servers={"fake": stdio()})
    marker = tmp_path / "ran"
    upstream.script(
        tool_call("mcp_fake_hang", [json.dumps({"marker": str(marker)})]), text("refused")
    )
    with OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=20) as api:
        reply = api.chat.completions.create(model="fake-model", messages=USER)
    assert reply.choices[0].message.content == "refused"
    assert offered(upstream, 0) == []
    assert "not offered" in tool_message(upstream, 1)
    assert not marker.exists()


def test_a_request_cannot_add_an_mcp_server(served: StartServed, upstream: FakeUpstream) -> None:
    _, url = served(platforms={"api_server": {"api_key": KEY}})
    with socket.socket() as listener:  # where the request points: nothing may connect to it
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        mcp_tool = {
            "type": "mcp",
            "server_label": "planted",
            "server_url": f"http://127.0.0.1:{port}/mcp",
            "require_approval": "never",
        }
        with (
            OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=20) as api,
            pytest.raises(openai.BadRequestError) as refused,
        ):
            api.responses.create(model="fake-model", input="hi", tools=[mcp_tool])  # pyright: ignore[reportArgumentType]
        assert refused.value.status_code == 400
        assert "only function tools" in str(refused.value)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert upstream.requests == []

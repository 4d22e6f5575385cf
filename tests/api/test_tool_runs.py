"""The agent's own tool runs on ``/v1/responses``: each is an ``mcp_call`` item streamed with
OpenAI's ``response.mcp_call*`` events, and a conversation's first response lists the tools it
offers in ``mcp_list_tools`` items — seen through the official openai SDK's
``responses.stream()`` against Iris on a real socket, a real MCP server (``tests/fakes/
mcp_server.py``) and the real terminal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI

from tests.api.conftest import IrisServer, StartIris
from tests.conftest import shared_workspace
from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(60)

KEY = "sk-iris-tool-runs"


def serving(iris_server: StartIris, tmp_path: Path, mode: str = "off") -> IrisServer:
    return iris_server(
        tools={"terminal": shared_workspace(tmp_path), "approval": {"mode": mode}},
        mcp_servers={"fake": stdio()},
        platforms={"api_server": {"api_key": KEY}},
    )


@pytest.fixture
def client(iris_server: StartIris, tmp_path: Path) -> Iterator[OpenAI]:
    server = serving(iris_server, tmp_path)
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=30) as c:
        yield c


def streamed(client: OpenAI, **params: Any) -> tuple[list[Any], Any]:
    with client.responses.stream(model="iris-agent", **params) as stream:
        events = list(stream)
        return events, stream.get_final_response()


def of_item(events: list[Any], item_id: str) -> list[str]:
    """The types of the events about one item, in order."""
    kinds: list[str] = []
    for event in events:
        item = getattr(event, "item", None)
        if getattr(event, "item_id", None) == item_id or getattr(item, "id", None) == item_id:
            kinds.append(event.type)
    return kinds


def test_an_mcp_tool_run_is_an_mcp_call_item_with_its_progress_notes(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    steps = tool_call("mcp_fake_steps", ['{"n": 3, "seconds": 0.3}'], content="Counting.")
    upstream.script(steps, text("Three steps."))
    events, final = streamed(client, input="count")
    assert final.status == "completed" and final.output_text.endswith("Three steps.")
    (run,) = [item for item in final.output if item.type == "mcp_call"]
    assert (run.server_label, run.name, run.status) == ("fake", "steps", "completed")
    assert json.loads(run.arguments) == {"n": 3, "seconds": 0.3}
    assert run.output == "steps done" and run.error is None
    assert of_item(events, run.id) == [
        "response.output_item.added",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        *["response.mcp_call.in_progress"] * 3,
        "response.mcp_call.completed",
        "response.output_item.done",
    ]
    notes = [
        getattr(e, "note", None)
        for e in events
        if e.type == "response.mcp_call.in_progress" and getattr(e, "note", None)
    ]
    assert notes == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    # The commentary before the call, the call, then the answer: in the order they happened.
    kinds = [item.type for item in final.output]
    assert kinds[-3:] == ["message", "mcp_call", "message"]


def test_the_first_response_lists_the_offered_tools_once_per_conversation(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(text("Hello."))
    events, first = streamed(client, input="hi")
    listings = {item.server_label: item for item in first.output if item.type == "mcp_list_tools"}
    assert set(listings) == {"iris", "fake"}
    fake = {tool.name: tool for tool in listings["fake"].tools}
    assert {"steps", "env", "refuse"} <= set(fake)
    assert fake["steps"].input_schema["properties"]["n"]["type"] == "integer"
    assert "terminal" in {tool.name for tool in listings["iris"].tools}
    (listing_id,) = [listings["fake"].id]
    assert of_item(events, listing_id) == [
        "response.output_item.added",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.output_item.done",
    ]
    upstream.script(text("Again."))
    _, second = streamed(client, input="more", previous_response_id=first.id)
    assert [item.type for item in second.output] == ["message"]


def test_a_failing_tool_is_a_failed_mcp_call_with_its_error(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(tool_call("mcp_fake_refuse", ["{}"]), text("It refused."))
    events, final = streamed(client, input="try")
    (run,) = [item for item in final.output if item.type == "mcp_call"]
    assert run.status == "failed" and run.output is None
    error = run.error.model_dump() if hasattr(run.error, "model_dump") else run.error
    assert error["type"] == "mcp_tool_execution_error"
    assert "no such record" in error["content"][0]["text"]
    assert "response.mcp_call.failed" in of_item(events, run.id)


def test_the_terminal_is_an_mcp_call_of_the_iris_label(
    upstream: FakeUpstream, client: OpenAI, tmp_path: Path
) -> None:
    upstream.script(tool_call("terminal", ['{"command": "echo hi there"}']), text("Done."))
    _, final = streamed(client, input="run it")
    (run,) = [item for item in final.output if item.type == "mcp_call"]
    assert (run.server_label, run.name) == ("iris", "terminal")
    assert "hi there" in (run.output or "")


def test_a_call_that_waits_for_approval_shows_in_the_response_that_runs_it(
    upstream: FakeUpstream, iris_server: StartIris, tmp_path: Path
) -> None:
    server = serving(iris_server, tmp_path, mode="ask")
    upstream.script(tool_call("terminal", ['{"command": "echo ok"}']), text("Ran."))
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=30) as client:
        _, first = streamed(client, input="go")
        assert [i.type for i in first.output if i.type.startswith("mcp_c")] == []
        asked = first.output[-1]
        assert asked.type == "mcp_approval_request"
        answer: Any = [
            {"type": "mcp_approval_response", "approval_request_id": asked.id, "approve": True}
        ]
        events, second = streamed(client, input=answer, previous_response_id=first.id)
    (run,) = [item for item in second.output if item.type == "mcp_call"]
    assert run.approval_request_id == asked.id and run.status == "completed"
    assert of_item(events, run.id)[-2:] == [
        "response.mcp_call.completed",
        "response.output_item.done",
    ]
    assert second.output_text == "Ran."


def test_a_client_that_sends_the_output_back_as_input_is_understood(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    upstream.script(tool_call("mcp_fake_env", ['{"name": "HOME"}']), text("Seen."))
    first = client.responses.create(model="iris-agent", input="look")
    replay: Any = [
        {"role": "user", "content": "look"},
        *[item.model_dump(exclude_none=True) for item in first.output],
        {"role": "user", "content": "and now?"},
    ]
    upstream.script(text("Still here."))
    second = client.responses.create(model="iris-agent", input=replay)
    assert second.output_text == "Still here."
    sent = upstream.requests[-1].body["messages"]
    assert [m["role"] for m in sent if m["role"] != "system"] == ["user", "assistant", "user"]


def test_a_server_that_asks_the_person_is_declined_with_the_reason_shown(
    upstream: FakeUpstream, client: OpenAI
) -> None:
    """OpenAI defines no pause for an MCP server's elicitation: on the API it is declined at
    once, and the mcp_call's progress says why."""
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Not deleted."))
    events, final = streamed(client, input="delete a.txt")
    (run,) = [item for item in final.output if item.type == "mcp_call"]
    assert run.output == "not deleted (decline)"
    notes = [getattr(e, "note", "") for e in events if e.type == "response.mcp_call.in_progress"]
    assert any("declined: this surface cannot ask the person" in n for n in notes if n)

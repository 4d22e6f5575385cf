"""Ask before acting on the API: the official openai SDK against Iris on a real socket, the real
agent and ``terminal`` against the scripted upstream.

``/v1/responses`` does what OpenAI's API does: an ``mcp_approval_request`` output item ends the
response (``completed``), and an ``mcp_approval_response`` input item with
``previous_response_id`` answers it, in a response that carries on the same turn."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai import BadRequestError, NotFoundError, OpenAI

from iris.surfaces.api.routes import ApiSurface
from tests.api.conftest import IrisServer, StartIris
from tests.api.openresponses import valid_response
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(30)

KEY = "sk-iris-approvals-key"
COMMAND = "echo ran >> runs.txt"
CALL = tool_call("terminal", [f'{{"command": "{COMMAND}"}}'], content="Checking.")


def runs(tmp_path: Path) -> int:
    marker = tmp_path / "runs.txt"
    return marker.read_text().count("ran") if marker.exists() else 0


def told(upstream: FakeUpstream) -> str:
    """What the model was told the tool returned (the second upstream request)."""
    message = upstream.requests[1].body["messages"][-1]
    assert message["role"] == "tool"
    return str(message["content"])


def asking(iris_server: StartIris, tmp_path: Path, timeout: float = 30) -> IrisServer:
    return iris_server(
        tools={"terminal": {"cwd": str(tmp_path)}, "approval": {"mode": "ask", "timeout": timeout}},
        platforms={"api_server": {"api_key": KEY}},
    )


@pytest.fixture
def client(iris_server: StartIris, tmp_path: Path) -> Iterator[OpenAI]:
    server = asking(iris_server, tmp_path)
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as c:
        yield c


def answer(approval_id: str, approve: bool) -> Any:
    return [
        {"type": "mcp_approval_response", "approval_request_id": approval_id, "approve": approve}
    ]


def test_approved_the_held_turn_runs_the_tool_once_and_answers(
    upstream: FakeUpstream, client: OpenAI, tmp_path: Path
) -> None:
    upstream.script(CALL, text("It ", "ran."))
    first = client.responses.create(model="iris-agent", input="go")
    # (The Open Responses schema has no MCP items; the SDK's own types parsed it.)
    assert first.status == "completed"
    asked = first.output[-1]
    assert asked.type == "mcp_approval_request"
    assert asked.name == "terminal" and asked.arguments == f'{{"command": "{COMMAND}"}}'
    assert asked.server_label == "iris"
    assert runs(tmp_path) == 0
    second = client.responses.create(
        model="iris-agent", previous_response_id=first.id, input=answer(asked.id, True)
    )
    valid_response(second)
    assert second.status == "completed" and second.output_text == "It ran."
    assert second.previous_response_id == first.id
    assert runs(tmp_path) == 1
    assert not told(upstream).startswith("not approved")
    # The conversation goes on from the second response as from any other.
    upstream.script(text("Again?"))
    client.responses.create(model="iris-agent", previous_response_id=second.id, input="more")
    sent = upstream.requests[-1].body["messages"]
    assert [m["role"] for m in sent[-5:]] == ["user", "assistant", "tool", "assistant", "user"]


def test_denied_never_runs_and_the_model_is_told_in_the_tool_result(
    upstream: FakeUpstream, client: OpenAI, tmp_path: Path
) -> None:
    upstream.script(CALL, text("Not run, as you said."))
    # The first response streams: the SDK's stream helper checks the event order.
    with client.responses.stream(model="iris-agent", input="go") as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_response()
    assert kinds[-3:] == [
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    asked = first.output[-1]
    assert asked.type == "mcp_approval_request"
    second = client.responses.create(
        model="iris-agent", previous_response_id=first.id, input=answer(asked.id, False)
    )
    assert second.output_text == "Not run, as you said."
    assert runs(tmp_path) == 0
    result = told(upstream)
    assert result.startswith("not approved (denied by api)") and "work around" in result


def held_turns(server: IrisServer) -> int:
    (surface,) = [s for s in server.app.state.surfaces if isinstance(s, ApiSurface)]
    return surface.held.count


def test_nobody_answers_the_turn_ends_without_calling_the_model_and_a_late_yes_is_refused(
    upstream: FakeUpstream, iris_server: StartIris, tmp_path: Path
) -> None:
    """Nobody is attached to a held turn (its response ended at the request): when the request
    times out the turn ends there, and the model is not called again (finding 2 of the third
    hardening pass: it was, outside every turn limit)."""
    upstream.script(CALL)
    server = asking(iris_server, tmp_path, timeout=0.3)
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as client:
        first = client.responses.create(model="iris-agent", input="go")
        asked = first.output[-1]
        deadline = time.monotonic() + 10
        while held_turns(server) and time.monotonic() < deadline:
            time.sleep(0.05)  # the held turn ends at the request's timeout
        assert held_turns(server) == 0
        with pytest.raises(BadRequestError) as late:
            client.responses.create(
                model="iris-agent", previous_response_id=first.id, input=answer(asked.id, True)
            )
    assert late.value.code == "approval_decided"
    assert "timeout by timeout" in late.value.message
    assert runs(tmp_path) == 0
    assert len(upstream.requests) == 1
    upstream.assert_used_up()


def test_answers_that_do_not_fit_get_errors_naming_the_field(
    upstream: FakeUpstream, client: OpenAI, tmp_path: Path
) -> None:
    with pytest.raises(NotFoundError) as unknown:
        client.responses.create(
            model="iris-agent", previous_response_id="resp_x", input=answer("appr_0abc", True)
        )
    assert unknown.value.code == "approval_unknown"
    with pytest.raises(BadRequestError) as missing:
        client.responses.create(model="iris-agent", input=answer("appr_0abc", True))
    assert missing.value.code == "missing_required_parameter"
    upstream.script(CALL, text("ok"))
    first = client.responses.create(model="iris-agent", input="go")
    asked = first.output[-1]
    with pytest.raises(BadRequestError) as wrong:
        client.responses.create(
            model="iris-agent", previous_response_id="resp_other", input=answer(asked.id, True)
        )
    assert wrong.value.param == "previous_response_id"
    # Still waiting: the right answer is taken.
    second = client.responses.create(
        model="iris-agent", previous_response_id=first.id, input=answer(asked.id, True)
    )
    assert second.output_text == "ok" and runs(tmp_path) == 1


def test_chat_completions_cannot_ask_so_the_tool_is_refused_with_the_reason(
    upstream: FakeUpstream, client: OpenAI, tmp_path: Path
) -> None:
    upstream.script(CALL, text("I was not allowed."))
    completion = client.chat.completions.create(
        model="iris-agent", messages=[{"role": "user", "content": "go"}]
    )
    assert (completion.choices[0].message.content or "").endswith("I was not allowed.")
    assert runs(tmp_path) == 0
    result = told(upstream)
    assert result.startswith("not approved") and "nobody can be asked here" in result


def test_the_answer_streams_the_rest_of_the_turn_in_order(
    upstream: FakeUpstream, client: OpenAI, tmp_path: Path
) -> None:
    upstream.script(CALL, text("Done ", "now."))
    first = client.responses.create(model="iris-agent", input="go")
    asked = first.output[-1]
    with client.responses.stream(
        model="iris-agent", previous_response_id=first.id, input=answer(asked.id, True)
    ) as stream:
        kinds = [event.type for event in stream]
        second = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed" and "response.output_text.delta" in kinds
    assert second.output_text == "Done now." and second.id != first.id
    assert runs(tmp_path) == 1
    assert client.responses.retrieve(second.id).output_text == "Done now."


def _reading(iris_server: StartIris, tmp_path: Path, auto: list[str]) -> tuple[OpenAI, Path]:
    notes = tmp_path / "notes.txt"
    notes.write_text("the plan: ship on friday")
    server = iris_server(
        tools={"read_file": {"roots": [str(tmp_path)]}, "approval": {"mode": "ask", "auto": auto}},
        platforms={"api_server": {"api_key": KEY}},
    )
    return OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10), notes


def test_read_file_through_the_api_asks_like_terminal(
    upstream: FakeUpstream, iris_server: StartIris, tmp_path: Path
) -> None:
    """Whoever holds the API key is not the operator: Iris's files are not read unasked."""
    client, notes = _reading(iris_server, tmp_path, auto=[])
    read = tool_call("read_file", [f'{{"path": "{notes}"}}'])
    upstream.script(read, read, text("I may not read it."))
    with client:
        first = client.responses.create(model="iris-agent", input="what is in my notes?")
        asked = first.output[-1]
        assert asked.type == "mcp_approval_request" and asked.name == "read_file"
        assert len(upstream.requests) == 1  # nothing was read, nothing went back to the model
        completion = client.chat.completions.create(
            model="iris-agent", messages=[{"role": "user", "content": "what is in my notes?"}]
        )
    assert completion.choices[0].message.content == "I may not read it."
    result = told_at(upstream, 2)
    assert "nobody can be asked here" in result and "friday" not in result


def test_read_file_listed_in_auto_runs_unasked_on_the_api(
    upstream: FakeUpstream, iris_server: StartIris, tmp_path: Path
) -> None:
    client, notes = _reading(iris_server, tmp_path, auto=["read_file"])
    upstream.script(tool_call("read_file", [f'{{"path": "{notes}"}}']), text("Friday."))
    with client:
        completion = client.chat.completions.create(
            model="iris-agent", messages=[{"role": "user", "content": "when do we ship?"}]
        )
    assert completion.choices[0].message.content == "Friday."
    assert "ship on friday" in told(upstream)


def told_at(upstream: FakeUpstream, index: int) -> str:
    """What the model was told the tool returned, in the ``index``-th upstream request."""
    message = upstream.requests[index].body["messages"][-1]
    assert message["role"] == "tool"
    return str(message["content"])

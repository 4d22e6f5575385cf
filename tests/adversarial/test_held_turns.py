"""Finding 2 of the third pass: held API approvals escaped the turn limits. A ``/v1/responses``
turn waiting for an ``mcp_approval_response`` started before it was admitted and gave its
slots back when its HTTP response ended, and at the approval's timeout called the model again:
30 such requests with ``max_concurrent: 2`` led to 31 concurrent upstream calls. Now a held
turn starts only once admitted, takes its slots again before it goes on, ends at its timeout
without calling the model, and held turns are bounded (``max_held_turns``, then 429)."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adversarial.conftest import StartServed
from tests.conftest import shared_workspace
from tests.fakes.served import Served
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(90)

COMMAND = "echo ran >> runs.txt"
CALL = tool_call("terminal", [f'{{"command": "{COMMAND}"}}'], content="Checking.")
GATED_CALL = tool_call(
    "terminal", [f'{{"command": "{COMMAND}"}}'], content=["Checking", "."], gate_after=1
)


KEY = "sk-adversarial-held-turns-0123456789"  # agent tools run for a client with the key


def asking(tmp_path: Path, timeout: float, **api: Any) -> dict[str, Any]:
    return {
        "tools": {
            "terminal": shared_workspace(tmp_path),
            "approval": {"mode": "ask", "timeout": timeout},
        },
        "platforms": {"iris": {"enabled": False}, "api_server": {"api_key": KEY, **api}},
    }


def create(url: str, body: Any) -> httpx.Response:
    auth = {"authorization": f"Bearer {KEY}"}
    body = {"model": "iris-agent", **body}
    return httpx.post(f"{url}/v1/responses", json=body, headers=auth, timeout=30)


def answer(url: str, asked: dict[str, Any], approve: bool = True) -> httpx.Response:
    item = {"type": "mcp_approval_response", "approval_request_id": asked["id"]}
    body = {"previous_response_id": asked["response"], "input": [{**item, "approve": approve}]}
    return create(url, body)


def asked_of(reply: httpx.Response) -> dict[str, Any]:
    assert reply.status_code == 200, reply.text
    data = reply.json()
    item = data["output"][-1]
    assert item["type"] == "mcp_approval_request", data["output"]
    return {"id": item["id"], "response": data["id"]}


def said(reply: httpx.Response) -> str:
    """The text of the response's last message."""
    assert reply.status_code == 200, reply.text
    messages = [item for item in reply.json()["output"] if item["type"] == "message"]
    return "".join(part["text"] for part in messages[-1]["content"])


def turn_ends(server: Served, count: int) -> None:
    for _ in range(count):
        server.wait_for('"event": "turn.end"', timeout=30)


def test_thirty_held_turns_see_at_most_max_concurrent_upstream_calls(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.default = GATED_CALL  # every model call waits at the gate: in flight together
    server, url = served(server={"max_turns": 4}, **asking(tmp_path, 2.0, max_concurrent=2))
    with ThreadPoolExecutor(30) as pool:
        futures: list[Future[httpx.Response]] = [
            pool.submit(create, url, {"input": f"go {n}"}) for n in range(30)
        ]
        refused: list[httpx.Response] = []
        for future in as_completed(futures, timeout=60):
            refused.append(future.result())
            if len(refused) == 28:  # all but the admitted two, which wait at the gate
                break
        assert upstream.gate_reached.wait(10)
        assert all(r.status_code == 429 for r in refused), [r.status_code for r in refused]
        assert {r.json()["error"]["code"] for r in refused} == {"too_many_concurrent_requests"}
        upstream.release()
        held = [f.result() for f in futures if f.result() not in refused]
    assert [asked_of(r) for r in held]
    # Nobody answers: each held turn ends at its timeout, and the model is not called again.
    turn_ends(server, 2)
    assert len(upstream.requests) == 2, [r.body.get("messages") for r in upstream.requests]
    assert not (tmp_path / "ws" / "runs.txt").exists()


def test_held_turns_are_bounded_and_an_answer_takes_its_slot_again(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = served(**asking(tmp_path, 60.0, max_concurrent=1, max_held_turns=2))
    upstream.script(CALL, CALL)
    first, second = asked_of(create(url, {"input": "a"})), asked_of(create(url, {"input": "b"}))
    # Two turns wait for a person; a third that might ask is refused before it starts.
    third = create(url, {"input": "c"})
    assert third.status_code == 429 and third.json()["error"]["code"] == "too_many_held_turns"
    assert len(upstream.requests) == 2
    # Parked turns hold no slot; while another turn runs, an answer finds none: a 429, and the
    # turn is still parked, so the same answer goes through once the slot is free.
    upstream.script(GATED_CALL)
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(
            create, url, {"input": "d", "tools": [{"type": "function", "name": "f"}]}
        )
        assert upstream.gate_reached.wait(10)
        refused = answer(url, first)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too_many_concurrent_requests"
        upstream.release()
        assert busy.result().status_code == 200
    upstream.script(text("It ran."), text("Not run."))
    assert said(answer(url, first)) == "It ran."
    assert said(answer(url, second, approve=False)) == "Not run."
    assert (tmp_path / "ws" / "runs.txt").read_text().count("ran") == 1
    upstream.script(CALL)
    assert asked_of(create(url, {"input": "e"}))  # room again for a held turn
    assert upstream.unexpected == []

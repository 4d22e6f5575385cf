"""Ask before acting on the iris socket: the real server on 127.0.0.1, paired devices speaking
the protocol with ``websockets``, the real agent and ``terminal`` against the scripted upstream.
Every frame is checked against the shipped JSON Schema (see conftest)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.socket.conftest import Device, IrisServer, StartServer

pytestmark = pytest.mark.timeout(30)

COMMAND = "echo ran >> runs.txt"
CALL = tool_call("terminal", [f'{{"command": "{COMMAND}"}}'], content="Checking.")


def runs(tmp_path: Path) -> int:
    marker = tmp_path / "runs.txt"
    return marker.read_text().count("ran") if marker.exists() else 0


def told(upstream: FakeUpstream) -> str:
    message = upstream.requests[1].body["messages"][-1]
    assert message["role"] == "tool"
    return str(message["content"])


async def asking(
    iris_server: StartServer, tmp_path: Path, wait: float = 30, **approval: Any
) -> IrisServer:
    return await iris_server(
        streaming={"enabled": True},
        tools={
            "terminal": {"cwd": str(tmp_path)},
            "approval": {"mode": "ask", "timeout": wait, **approval},
        },
    )


async def paired(server: IrisServer, name: str, **kw: Any) -> Device:
    token = server.surface.runtime.devices.add(name)
    return await server.connect(token, **kw)


async def test_approved_once_on_the_phone_runs_once_and_every_device_sees_who(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL, text("It ran."))
    server = await asking(iris_server, tmp_path)
    phone, laptop = await paired(server, "phone"), await paired(server, "laptop")
    await laptop.send({"type": "message.send", "text": "go"})
    asked = (await phone.until("approval.request"))[-1]
    assert asked["name"] == "terminal" and asked["preview"] == COMMAND and asked["index"] == 1
    assert asked["args"] == {"command": COMMAND}  # an object, as tool.start's
    assert runs(tmp_path) == 0
    await phone.send(
        {"type": "approval.respond", "approval_id": asked["approval_id"], "decision": "once"}
    )
    frames = await laptop.turn()
    kinds = [f["type"] for f in frames]
    assert (
        kinds.index("approval.request") < kinds.index("approval.resolved") < kinds.index("tool.end")
    )
    resolved = next(f for f in frames if f["type"] == "approval.resolved")
    assert resolved == {
        **resolved,
        "approval_id": asked["approval_id"],
        "decision": "once",
        "by": "phone",
    }
    assert next(f for f in frames if f["type"] == "tool.end")["ok"] is True
    assert runs(tmp_path) == 1
    assert not told(upstream).startswith("not approved")


async def test_denied_never_runs_and_the_model_is_told(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL, text("Understood."))
    server = await asking(iris_server, tmp_path)
    phone = await paired(server, "phone")
    await phone.send({"type": "message.send", "text": "go"})
    asked = (await phone.until("approval.request"))[-1]
    await phone.send(
        {"type": "approval.respond", "approval_id": asked["approval_id"], "decision": "deny"}
    )
    frames = await phone.turn()
    assert any(
        f["type"] == "approval.resolved" and f["decision"] == "deny" and f["by"] == "phone"
        for f in frames
    )
    assert next(f for f in frames if f["type"] == "tool.end")["ok"] is False
    assert runs(tmp_path) == 0
    result = told(upstream)
    assert result.startswith("not approved (denied by phone)") and "work around" in result


async def test_nobody_answers_it_times_out_and_never_runs(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL, text("Nobody said yes."))
    server = await asking(iris_server, tmp_path, wait=0.5)
    phone = await paired(server, "phone")
    await phone.send({"type": "message.send", "text": "go"})
    frames = await phone.turn()
    resolved = next(f for f in frames if f["type"] == "approval.resolved")
    assert resolved["decision"] == "timeout" and resolved["by"] == "timeout"
    assert runs(tmp_path) == 0
    assert "silence is not consent" in told(upstream)
    # A late answer is told what ended it.
    await phone.send(
        {"type": "approval.respond", "approval_id": resolved["approval_id"], "decision": "once"}
    )
    error = (await phone.until("error"))[-1]
    assert error["code"] == "approval_decided" and error["message"] == (
        "already decided: timeout by timeout"
    )


async def test_two_devices_answer_at_once_one_decision_the_other_is_told(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL, text("ok"))
    server = await asking(iris_server, tmp_path)
    phone, laptop = await paired(server, "phone"), await paired(server, "laptop")
    await phone.send({"type": "message.send", "text": "go"})
    approval_id = (await phone.until("approval.request"))[-1]["approval_id"]
    await laptop.until("approval.request")
    await asyncio.gather(
        phone.send({"type": "approval.respond", "approval_id": approval_id, "decision": "deny"}),
        laptop.send({"type": "approval.respond", "approval_id": approval_id, "decision": "once"}),
    )
    phone_frames, laptop_frames = await phone.turn(), await laptop.turn()
    resolved = [f for f in phone_frames if f["type"] == "approval.resolved"]
    assert len(resolved) == 1 and resolved == [
        f for f in laptop_frames if f["type"] == "approval.resolved"
    ]
    winner = resolved[0]["by"]
    loser = laptop if winner == "phone" else phone
    errors = [f for f in loser.frames if f["type"] == "error"]
    assert [e["code"] for e in errors] == ["approval_decided"]
    assert errors[0]["message"] == f"already decided: {resolved[0]['decision']} by {winner}"
    assert runs(tmp_path) == (1 if resolved[0]["decision"] == "once" else 0)


async def test_a_device_that_reconnects_while_it_is_pending_is_asked_again(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL, text("Done."))
    server = await asking(iris_server, tmp_path)
    token = server.surface.runtime.devices.add("phone")
    phone = await server.connect(token)
    await phone.send({"type": "message.send", "text": "go"})
    asked = (await phone.until("approval.request"))[-1]
    seen_before = asked["seq"] - 1
    await phone.close()
    back = await server.connect(token, after_seq=seen_before)
    again = (await back.until("approval.request"))[-1]
    assert {k: again[k] for k in asked} == asked
    await back.send(
        {"type": "approval.respond", "approval_id": again["approval_id"], "decision": "once"}
    )
    frames = await back.turn()
    assert any(f["type"] == "approval.resolved" and f["by"] == "phone" for f in frames)
    assert runs(tmp_path) == 1


async def test_cancel_while_pending_ends_the_turn_and_closes_the_request_everywhere(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL)
    server = await asking(iris_server, tmp_path)
    phone, laptop = await paired(server, "phone"), await paired(server, "laptop")
    await phone.send({"type": "message.send", "text": "go"})
    approval_id = (await phone.until("approval.request"))[-1]["approval_id"]
    await laptop.until("approval.request")
    await laptop.send({"type": "turn.cancel"})
    for device in (phone, laptop):
        frames = await device.turn()
        resolved = [f for f in frames if f["type"] == "approval.resolved"]
        assert [(f["approval_id"], f["decision"], f["by"]) for f in resolved] == [
            (approval_id, "cancelled", "interrupt")
        ]
    assert runs(tmp_path) == 0
    assert await server.surface.runtime.approvals.pending(server.surface.room("main").session) == []


async def test_bad_and_unknown_answers_get_error_frames(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    server = await asking(iris_server, tmp_path)
    phone = await paired(server, "phone")
    await phone.send({"type": "approval.respond", "approval_id": "appr_0123", "decision": "once"})
    error = await phone.recv()
    assert error["type"] == "error" and error["code"] == "approval_unknown"
    await phone.send({"type": "approval.respond", "approval_id": "appr_0123", "decision": "yes"})
    error = await phone.recv()
    assert error["code"] == "bad_field" and "once, chat or deny" in error["message"]


async def test_an_auto_glob_runs_unasked(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(CALL, text("ok"))
    server = await asking(iris_server, tmp_path, auto=["term*"])
    phone = await paired(server, "phone")
    await phone.send({"type": "message.send", "text": "go"})
    frames = await phone.turn()
    assert not any(f["type"].startswith("approval.") for f in frames)
    assert runs(tmp_path) == 1


async def test_a_device_that_resumes_past_the_log_sees_the_open_request_in_its_sync(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """A device whose position the log no longer reaches gets a ``sync`` instead of the frames,
    so it never sees the ``approval.request``: the sync carries the chat's open requests (and
    none once they are answered)."""
    upstream.script(CALL, text("It ran."))
    server = await asking(iris_server, tmp_path)
    phone = await paired(server, "phone")
    await phone.send({"type": "message.send", "text": "go"})
    asked = (await phone.until("approval.request"))[-1]
    latest = asked["seq"]
    # From another log (its seqs ahead of this one's): the device is sent a sync.
    laptop = await paired(server, "laptop", after_seq=latest + 100)
    sync = (await laptop.until("sync"))[-1]
    assert sync["messages"][0]["text"] == "go"
    (carried,) = sync["approvals"]
    assert carried["approval_id"] == asked["approval_id"] and carried["preview"] == COMMAND
    assert "type" not in carried and carried["expires_at"] == asked["expires_at"]
    # The device answers what the sync showed it.
    await laptop.send(
        {"type": "approval.respond", "approval_id": carried["approval_id"], "decision": "once"}
    )
    await laptop.until("typing", on=False)
    assert runs(tmp_path) == 1
    later = await paired(server, "tablet", after_seq=10_000)
    assert "approvals" not in (await later.until("sync"))[-1]

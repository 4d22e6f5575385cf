"""A server killed mid-reply (kill -9): when it comes back, what the model sees as history
matches what devices saw — the shown half of the reply, marked interrupted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.fakes.upstream import FakeUpstream, text
from tests.socket.conftest import StartServer
from tests.socket.cut_turns import leave_a_cut_turn

pytestmark = pytest.mark.timeout(30)

STREAMING = {"enabled": True}


@pytest.mark.parametrize("question_saved", [True, False])
async def test_the_shown_half_of_a_cut_reply_is_in_the_models_history(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path, question_saved: bool
) -> None:
    await leave_a_cut_turn(tmp_path / "iris.db", question_saved=question_saved)
    server = await iris_server(streaming=STREAMING)
    device = await server.connect(after_seq=0)
    frames = await device.turn()
    stop = next(f for f in frames if f["type"] == "message.stop")
    assert stop["final_text"] == "The sky is bl"
    assert any(f["type"] == "error" and f["code"] == "interrupted" for f in frames)

    upstream.script(text("blue."))
    await device.send({"type": "message.send", "text": "go on"})
    await device.turn()
    sent = upstream.requests[-1].body["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "what colour is the sky?"),
        ("assistant", "The sky is bl\n\n[interrupted]"),
        ("user", "go on"),
    ]


async def test_a_turn_saves_its_question_before_the_reply(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(text("Hel", "lo", gate_after=1))
    server = await iris_server(streaming=STREAMING)
    device = await server.connect()
    await device.send({"type": "message.send", "text": "hi there"})
    await device.until("message.start")
    await asyncio.to_thread(upstream.gate_reached.wait, 5)
    # Mid-reply, as a kill -9 would find it: the question is already in the history.
    history = await server.surface.runtime.sessions.history("iris:main")
    assert history == [{"role": "user", "content": "hi there"}]
    upstream.release()
    await device.turn()
    history = await server.surface.runtime.sessions.history("iris:main")
    assert history[-1] == {"role": "assistant", "content": "Hello"}

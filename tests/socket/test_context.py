"""Conversations that last on the iris socket: the window, compaction, and the chat commands.

The real server and agent against the scripted upstream with a context limit that answers
like OpenAI (400 ``context_length_exceeded``); every frame is checked against the schema.
"""

from __future__ import annotations

from typing import Any

import pytest

from iris.agent.context import NOTE, SUMMARY_PREFIX
from tests.fakes.long_chat import LongChat, is_summary_request
from tests.fakes.upstream import FakeUpstream, hold, reasoning, text
from tests.socket.conftest import Device, StartServer

pytestmark = pytest.mark.timeout(60)

STREAMING = {"enabled": True}
LIMIT = 30_000  # characters the fake model reads at most


def answers(frames: list[dict[str, Any]]) -> list[str]:
    return [f["final_text"] for f in frames if f["type"] == "message.stop"]


def sent_messages(upstream: FakeUpstream) -> list[list[dict[str, Any]]]:
    return [r.body["messages"] for r in upstream.requests if not is_summary_request(r)]


async def command(device: Device, text_: str) -> str:
    await device.send({"type": "message.send", "text": text_})
    frames = await device.until("command")
    return str(frames[-1]["text"])


async def test_fifty_long_turns_keep_answering_with_a_summary_in_place_of_old_turns(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.context_limit = LIMIT
    model = LongChat(reply_chars=2_000)
    upstream.default = model.scenario
    server = await iris_server(streaming=STREAMING, model={"context_window": 6_000})
    device = await server.connect()
    notes = 0
    for n in range(1, 51):
        await device.send({"type": "message.send", "text": f"question {n}"})
        frames = await device.turn(within=15)
        assert not [f for f in frames if f["type"] == "error"], frames
        assert answers(frames)[-1].startswith(f"reply {n}:")
        notes += sum(1 for f in frames if f["type"] == "commentary" and f["text"] == NOTE)
    assert upstream.refused == []  # the budget kept every request within the window
    assert model.summaries and notes == len(model.summaries)
    last = sent_messages(upstream)[-1]
    assert last[0]["role"] == "system" and last[0]["content"].startswith(SUMMARY_PREFIX)
    assert last[0]["content"].endswith(model.summaries[-1])
    assert {"role": "user", "content": "question 1"} not in last
    assert last[-1] == {"role": "user", "content": "question 50"}
    # The summary is never streamed as the answer; the store kept every message.
    assert not any("summary" in a for a in answers(device.frames))
    stored = server.surface.runtime.store.query(
        "SELECT COUNT(*) AS n FROM session_messages WHERE session='iris:main'"
    )
    assert stored[0]["n"] == 100


async def test_a_providers_400_mid_conversation_is_recovered_once(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    # No window configured: Iris assumes a big one; the provider knows better.
    model = LongChat(reply_chars=3_000)
    upstream.default = model.scenario
    server = await iris_server(streaming=STREAMING)
    device = await server.connect()
    for n in range(1, 6):
        await device.send({"type": "message.send", "text": f"question {n}"})
        await device.turn()
    upstream.context_limit = 10_000  # now the conversation is too long for the model
    await device.send({"type": "message.send", "text": "question 6"})
    frames = await device.turn()
    assert answers(frames) == [f for f in answers(frames) if f.startswith("reply 6:")]
    assert any(f["type"] == "commentary" and f["text"] == NOTE for f in frames)
    assert not [f for f in frames if f["type"] == "error"]
    assert len(upstream.refused) == 1
    # The next turn fits at once: the refusal taught Iris the window.
    await device.send({"type": "message.send", "text": "question 7"})
    frames = await device.turn()
    assert answers(frames)[-1].startswith("reply 7:")
    assert len(upstream.refused) == 1


async def test_help_status_and_unknown_words(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("hello there"), text("it is a path"))
    server = await iris_server(streaming=STREAMING, model={"context_window": 8_000})
    device = await server.connect()
    other = await server.connect()
    help_ = await command(device, "/help")
    for word in ("/new", "/stop", "/model", "/reasoning", "/compact", "/status", "/help"):
        assert word in help_
    assert "last reply: none yet" in await command(device, "/status")
    await device.send({"type": "message.send", "text": "hi"})
    await device.turn()
    status = await command(device, "/status")
    assert "model: fake-model" in status
    assert "of 8000 tokens" in status and "last reply: 10 in, 5 out" in status
    # Unknown /words and paths are messages for the model.
    await device.send({"type": "message.send", "text": "/etc/hosts is odd"})
    frames = await device.turn()
    assert answers(frames) == ["it is a path"]
    assert upstream.requests[-1].body["messages"][-1]["content"] == "/etc/hosts is odd"
    # Commands are answered to the device that sent them only, and never stored.
    await other.send({"type": "ping"})
    seen = await other.until("pong")
    assert "command" not in [f["type"] for f in seen]
    history = await server.surface.runtime.sessions.history("iris:main")
    assert all(not str(m["content"]).startswith("/help") for m in history)
    assert len(upstream.requests) == 2


async def test_new_starts_fresh_and_keeps_the_old_conversation(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("one"), text("two"))
    server = await iris_server(streaming=STREAMING)
    device = await server.connect()
    await device.send({"type": "message.send", "text": "remember 42"})
    await device.turn()
    assert "new conversation" in await command(device, "/new")
    await device.send({"type": "message.send", "text": "what number?"})
    await device.turn()
    assert upstream.requests[-1].body["messages"] == [{"role": "user", "content": "what number?"}]
    stored = server.surface.runtime.store.query(
        "SELECT COUNT(*) AS n FROM session_messages WHERE session='iris:main'"
    )
    assert stored[0]["n"] == 4


async def test_stop_interrupts_the_running_reply(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(hold("partial ", "answer"))
    server = await iris_server(streaming=STREAMING)
    device = await server.connect()
    assert await command(device, "/stop") == "nothing to stop"
    await device.send({"type": "message.send", "text": "go on"})
    await device.until("message.start")
    assert "/stop it first" in await command(device, "/new")
    assert await command(device, "/stop") == "stopped"
    frames = await device.turn()
    assert not [f for f in frames if f["type"] == "error"]


async def test_model_switches_among_configured_models(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("from the fallback"))
    fallback = {
        "provider": "chat_completions",
        "base_url": upstream.base_url,
        "name": "backup-model",
        "api_key": "sk-test",
    }
    server = await iris_server(streaming=STREAMING, model={"fallback": [fallback]})
    device = await server.connect()
    assert await command(device, "/model") == "model: fake-model (also configured: backup-model)"
    assert "unknown model 'gpt-9'" in await command(device, "/model gpt-9")
    assert (
        await command(device, "/model backup-model")
        == "model: backup-model (from the next message)"
    )
    await device.send({"type": "message.send", "text": "hi"})
    await device.turn()
    assert upstream.requests[-1].body["model"] == "backup-model"
    assert "model: backup-model" in await command(device, "/status")


async def test_reasoning_on_and_off(iris_server: StartServer, upstream: FakeUpstream) -> None:
    upstream.script(reasoning(["thinking hard"], ["answer one"]), reasoning(["more"], ["two"]))
    server = await iris_server(streaming=STREAMING)
    device = await server.connect()
    assert await command(device, "/reasoning") == "reasoning hidden"
    assert await command(device, "/reasoning on") == "reasoning shown"
    await device.send({"type": "message.send", "text": "hi"})
    frames = await device.turn()
    assert any("thinking hard" in str(f.get("reasoning", "")) for f in frames)
    assert await command(device, "/reasoning off") == "reasoning hidden"
    await device.send({"type": "message.send", "text": "again"})
    frames = await device.turn()
    assert not any("reasoning" in f for f in frames)
    assert await command(device, "/reasoning maybe") == "usage: /reasoning on|off"


async def test_compact_summarizes_now(iris_server: StartServer, upstream: FakeUpstream) -> None:
    model = LongChat(reply_chars=500)
    upstream.default = model.scenario
    server = await iris_server(streaming=STREAMING)
    device = await server.connect()
    assert await command(device, "/compact") == "nothing to compact yet"
    for n in range(1, 4):
        await device.send({"type": "message.send", "text": f"question {n}"})
        await device.turn()
    assert (await command(device, "/compact")).startswith(NOTE)
    await device.send({"type": "message.send", "text": "question 4"})
    await device.turn()
    sent = sent_messages(upstream)[-1]
    assert sent[0]["content"] == SUMMARY_PREFIX + model.summaries[-1]
    assert {"role": "user", "content": "question 1"} not in sent
    assert sent[-1] == {"role": "user", "content": "question 4"}

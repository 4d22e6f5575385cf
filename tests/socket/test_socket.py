"""End to end: the real server on 127.0.0.1, the real agent against the scripted upstream, and
devices speaking the protocol with the ``websockets`` client. Every received frame is checked
against the JSON Schema (see conftest)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from iris.fanout.framelog import SqliteFrameLog
from iris.fanout.hub import Hub
from iris.protocol.types import RULES
from iris.state.sqlite import Store
from tests.conftest import shared_workspace
from tests.fakes.upstream import FakeUpstream, error, gated, hold, reasoning, text, tool_call
from tests.socket.conftest import StartServer

STREAMING = {"enabled": True}


def types(frames: list[dict[str, Any]]) -> list[str]:
    return [f["type"] for f in frames]


def increasing(frames: list[dict[str, Any]]) -> bool:
    return all(a["seq"] < b["seq"] for a, b in itertools.pairwise(frames))


async def test_a_tool_turn_follows_doc05(
    iris_server: StartServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "README.md").write_text("# hi\n")
    upstream.script(
        tool_call("terminal", ['{"command": ', '"ls"}'], content="Let me look."),
        text("The repo ", "has one ", "file."),
    )
    server = await iris_server(
        streaming=STREAMING,
        tools={"enabled": ["terminal"], "terminal": shared_workspace(tmp_path)},
    )
    device = await server.connect()
    await device.send({"type": "message.send", "text": "summarize the repo"})
    frames = await device.turn()
    progress = [f for f in frames if f["type"] == "tool.progress"]
    assert all(f["index"] == 1 and f["name"] == "terminal" for f in progress)
    # Updates and progress notes are optional by nature: newest wins for a device behind.
    assert [t for t in types(frames) if t not in ("tool.progress", "message.update")] == [
        "typing",
        "message.start",
        "commentary",
        "tool.start",
        "tool.end",
        "message.start",
        "message.stop",
        "typing",
    ]
    assert frames[0]["on"] is True and frames[-1]["on"] is False
    first, second = (f["message_id"] for f in frames if f["type"] == "message.start")
    assert first != second
    closed_first = next(f["seq"] for f in frames if f["type"] == "commentary")
    for update in (f for f in frames if f["type"] == "message.update"):
        assert update["message_id"] == (first if update["seq"] < closed_first else second)
    commentary = next(f for f in frames if f["type"] == "commentary")
    assert commentary == {**commentary, "message_id": first, "text": "Let me look."}
    start = next(f for f in frames if f["type"] == "tool.start")
    assert start["index"] == 1 and start["name"] == "terminal"
    assert start["args"] == {"command": "ls"} and start["preview"] == "ls"
    end = next(f for f in frames if f["type"] == "tool.end")
    assert end["index"] == 1 and end["ok"] is True and "README.md" in end["output_preview"]
    stop = frames[-2]
    assert stop["message_id"] == second and stop["final_text"] == "The repo has one file."
    assert stop["model"] == "fake-model" and stop["tokens"] == 10  # 5 per round
    assert all(f["chat_id"] == "main" for f in frames) and increasing(frames)


async def test_updates_extend_the_snapshot_until_stop(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    chunks = [f"word{n} " for n in range(30)]
    upstream.script(text(*chunks, delay=0.03))
    server = await iris_server(
        streaming=STREAMING, display={"platforms": {"iris": {"buffer_threshold": 10}}}
    )
    device = await server.connect()
    await device.send({"type": "message.send", "text": "count"})
    frames = await device.turn()
    updates = [f["text"] for f in frames if f["type"] == "message.update"]
    assert len(updates) >= 3  # a device that keeps up sees the reply grow
    assert all(b.startswith(a) and len(b) > len(a) for a, b in itertools.pairwise(updates))
    assert frames[-2]["final_text"] == "".join(chunks).strip()


async def test_reasoning_shown_when_iris_shows_it(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(reasoning(["think ", "hard"], ["4", "2"]))
    server = await iris_server(
        streaming=STREAMING, display={"platforms": {"iris": {"show_reasoning": True}}}
    )
    device = await server.connect()
    await device.send({"type": "message.send", "text": "answer?"})
    frames = await device.turn()
    stop = frames[-2]
    assert stop["type"] == "message.stop"
    assert stop["final_text"] == "42" and stop["reasoning"] == "think hard"
    assert all("think" not in f.get("text", "") for f in frames)  # never in the answer


async def test_reasoning_hidden_by_default(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(reasoning(["secret ", "thoughts"], ["42"]))
    server = await iris_server(streaming=STREAMING)
    device = await server.connect()
    await device.send({"type": "message.send", "text": "answer?"})
    frames = await device.turn()
    assert frames[-2]["final_text"] == "42" and "reasoning" not in frames[-2]
    assert "secret" not in str(frames)


async def test_streaming_off_sends_one_message(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("Hel", "lo"))
    server = await iris_server(
        streaming=STREAMING, display={"platforms": {"iris": {"streaming": False}}}
    )
    device = await server.connect()
    await device.send({"type": "message.send", "text": "hi"})
    frames = await device.turn()
    assert types(frames) == ["typing", "message", "typing"]
    assert frames[1]["text"] == "Hello" and frames[1]["role"] == "assistant"
    assert frames[1]["model"] == "fake-model"
    assert upstream.requests[-1].stream is False  # nothing to stream, so not asked to


async def test_two_devices_see_every_frame_and_the_user_echo(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("Hi ", "both"))
    server = await iris_server(streaming=STREAMING)
    phone = await server.connect()
    laptop = await server.connect(header=True)
    await phone.send({"type": "message.send", "text": "hello from the phone"})
    on_phone = await phone.turn()
    on_laptop = await laptop.turn()
    echo = on_laptop[0]
    assert echo["type"] == "message" and echo["role"] == "user"
    assert echo["text"] == "hello from the phone"
    assert on_laptop[1:] == on_phone  # the same frames, same seqs
    assert "user" not in [f.get("role") for f in on_phone]  # the sender gets no echo of itself


async def test_history_carries_over_to_the_next_turn(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("Nice to meet you, Ada."), text("Your name is Ada."))
    server = await iris_server(streaming=STREAMING)
    device = await server.connect()
    await device.send({"type": "message.send", "text": "I am Ada"})
    await device.turn()
    await device.send({"type": "message.send", "text": "who am I?"})
    frames = await device.turn()
    assert frames[-2]["final_text"] == "Your name is Ada."
    sent = upstream.requests[-1].body["messages"]
    assert [m["role"] for m in sent[-3:]] == ["user", "assistant", "user"]
    assert sent[-3]["content"] == "I am Ada" and sent[-1]["content"] == "who am I?"


async def test_reconnect_mid_reply_resumes_without_gap_or_duplicate(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(gated("one ", "two ", "three ", "four", after=2))
    server = await iris_server(
        streaming=STREAMING, display={"platforms": {"iris": {"buffer_threshold": 1}}}
    )
    device = await server.connect()
    await device.send({"type": "message.send", "text": "count"})
    await device.until("message.update", text="one two ")
    seen = device.max_seq
    await device.close()

    late = await server.connect()  # a second device that connects now catches up
    await late.send({"type": "resume", "after_seq": 0})
    caught_up = await late.until("message.update", text="one two ")
    # The user's message, the turn so far, and only the latest snapshot of the reply.
    assert types(caught_up) == ["message", "typing", "message.start", "message.update"]

    back = await server.connect(after_seq=seen)
    assert back.frames[0]["seq"] == seen  # ready: the position it resumes from
    upstream.release()
    rest = await back.turn()
    assert all(f["seq"] > seen for f in rest) and increasing(rest)
    assert rest[-2]["type"] == "message.stop"
    assert rest[-2]["final_text"] == "one two three four"
    late_rest = await late.turn()
    assert [f["seq"] for f in late_rest][-len(rest) :] == [f["seq"] for f in rest]


async def test_resume_on_an_open_connection_replays_in_order(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("a"), text("b"))
    server = await iris_server(streaming=STREAMING)
    device = await server.connect()
    await device.send({"type": "message.send", "text": "1"})
    first = await device.turn()
    await device.send({"type": "message.send", "text": "2"})
    second = await device.turn()
    await device.send({"type": "resume", "after_seq": first[-1]["seq"]})
    replay = await device.turn()
    assert replay[0]["type"] == "message" and replay[0]["role"] == "user"  # the log has it
    assert [f for f in replay[1:]] == [f for f in second if f["type"] != "message.update"]


async def test_resume_past_the_log_reach_sends_sync(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("one"), text("two"), text("three"))
    server = await iris_server(streaming=STREAMING, iris={"log_max_frames": 10})
    device = await server.connect()
    for word in ("1", "2", "3"):
        await device.send({"type": "message.send", "text": word})
        await device.turn()
    latest = device.max_seq
    back = await server.connect(after_seq=1)
    sync = await back.recv()
    assert sync["type"] == "sync" and sync["seq"] == latest
    assert [(m["role"], m["text"]) for m in sync["messages"]] == [
        ("user", "1"),
        ("assistant", "one"),
        ("user", "2"),
        ("assistant", "two"),
        ("user", "3"),
        ("assistant", "three"),
    ]
    await back.send({"type": "ping"})
    assert (await back.recv())["type"] == "pong"  # then live as usual


async def test_cancel_ends_the_turn_with_the_text_so_far(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Once ", "upon "))
    server = await iris_server(
        streaming=STREAMING, display={"platforms": {"iris": {"buffer_threshold": 1}}}
    )
    device = await server.connect()
    await device.send({"type": "message.send", "text": "tell a story"})
    await device.until("message.update", text="Once upon ")
    await device.send({"type": "message.send", "text": "another"})
    busy = await device.until("error")
    assert busy[-1]["code"] == "turn_active"
    await device.send({"type": "turn.cancel"})
    frames = await device.turn(within=3.0)
    assert types(frames)[-2:] == ["message.stop", "typing"]
    assert frames[-2]["final_text"] == "Once upon"
    assert upstream.disconnected.wait(2.0)
    await device.send({"type": "turn.cancel"})
    assert (await device.recv())["code"] == "no_turn"


async def test_a_failed_turn_ends_with_error_then_typing_off(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(error(400, "bad request from the model"))
    server = await iris_server(streaming=STREAMING)
    device = await server.connect()
    await device.send({"type": "message.send", "text": "hi"})
    frames = await device.turn()
    assert types(frames) == ["typing", "error", "typing"]
    assert frames[1]["code"] == "provider_bad_request"


async def test_a_pause_in_the_model_still_shows_the_waiting_text(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Hi", " there"))
    server = await iris_server(
        streaming=STREAMING,
        display={"platforms": {"iris": {"edit_interval": 0.2, "buffer_threshold": 100}}},
    )
    device = await server.connect()
    await device.send({"type": "message.send", "text": "hello"})
    # " there" is below the threshold; the interval sends it although the model went quiet.
    await device.until("message.update", text="Hi there", within=3.0)
    await device.send({"type": "turn.cancel"})
    frames = await device.turn()
    assert frames[-2]["type"] == "message.stop" and frames[-2]["final_text"] == "Hi there"


async def test_a_device_that_stops_reading_slows_no_one(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    chunks = [f"{n:04d}" + "x" * 496 for n in range(200)]  # 100 000 characters in 200 deltas
    upstream.script(text(*chunks, delay=0.005))
    server = await iris_server(
        streaming=STREAMING,
        iris={"queue_size": 8},
        display={"platforms": {"iris": {"buffer_threshold": 1}}},
    )
    slow = await server.connect(receive_buffer=4096)
    slow.ws.transport.pause_reading()  # the device's app froze: its socket fills up
    fast = await server.connect()
    await fast.send({"type": "message.send", "text": "a long one"})
    frames = await fast.turn(within=20.0)  # the turn ends for everyone else
    assert frames[-2]["final_text"] == "".join(chunks)
    # Bounded: the frozen device's queue never holds the whole reply.
    assert all(sub.pending() <= 8 for sub in server.surface.hub.subscriptions("main"))

    slow.ws.transport.resume_reading()
    got = await slow.turn(within=20.0)
    assert increasing(got)
    kinds = types(got)
    assert kinds[0] == "message" and kinds[1] == "typing"  # the echo, then the turn
    assert kinds[-2:] == ["message.stop", "typing"]
    assert got[-2]["final_text"] == "".join(chunks)
    assert kinds.count("message.start") == 1
    assert kinds.count("message.update") < 200  # it skipped superseded snapshots


async def test_seq_and_history_survive_a_server_restart(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("Noted: blue."), text("Blue."))
    first = await iris_server(streaming=STREAMING)
    device = await first.connect()
    await device.send({"type": "message.send", "text": "my colour is blue"})
    await device.turn()
    await first.stop()
    assert await device.closed() == 1012  # "service restart": reconnect and resume
    second = await iris_server(streaming=STREAMING)  # the same database
    back = await second.connect(after_seq=device.max_seq)
    assert back.frames[0]["seq"] == device.max_seq
    await back.send({"type": "message.send", "text": "my colour?"})
    frames = await back.turn()
    assert frames[0]["seq"] == device.max_seq + 2  # +1 went to its own echo (for others)
    assert "my colour is blue" in str(upstream.requests[-1].body["messages"])


async def test_a_turn_cut_by_a_crash_is_closed_when_the_chat_comes_back(
    iris_server: StartServer, tmp_path: Path
) -> None:
    # What a server killed mid-reply leaves in its log: typing on and a half reply.
    store = Store(tmp_path / "iris.db")
    Hub(SqliteFrameLog(store, rules=RULES)).publish_all(
        "main",
        [
            {"type": "typing", "on": True},
            {"type": "message.start", "message_id": "m1", "role": "assistant"},
            {"type": "message.update", "message_id": "m1", "text": "Half a"},
        ],
    )
    store.close()
    server = await iris_server(streaming=STREAMING)
    device = await server.connect(after_seq=0)
    frames = await device.turn()
    # (the replay skips the snapshot: the stop that closes m1 supersedes it)
    assert types(frames) == ["typing", "message.start", "message.stop", "error", "typing"]
    assert frames[2]["final_text"] == "Half a" and frames[3]["code"] == "interrupted"

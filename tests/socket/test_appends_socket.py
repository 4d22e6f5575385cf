"""Append frames end to end: the real server, the real agent on the scripted upstream, devices
with and without the ``append`` feature on the same chat (every frame checked by the schema)."""

from __future__ import annotations

from typing import Any

from iris.protocol.appends import Held, extended, held
from tests.fakes.upstream import FakeUpstream, drop, gated, text
from tests.socket.conftest import Device, StartServer

STREAMING = {"enabled": True}
APPEND = ["append"]
# Emoji (astral, ZWJ, skin tone), combining marks and CJK, in deltas of a few characters.
CHUNKS = ["中文 ", "😀 ", "e\u0301 ", "👨‍👩‍👧 ", "word ", "👍🏽", "𠀋字 "] * 12
REPLY = "".join(CHUNKS)


def followed(frames: list[dict[str, Any]]) -> dict[int, str]:
    """Apply updates and appends as an app does; the text of the message after each seq.

    Fails if an append does not fit the text held (the offset is in UTF-16 code units)."""
    have: Held | None = None
    texts: dict[int, str] = {}
    for frame in frames:
        if frame["type"] == "message.start":
            have = Held("", 0)
        elif frame["type"] == "message.update":
            have = held(frame["text"])
        elif frame["type"] == "message.append":
            have = extended(have, frame["offset"], frame["text"])
            assert have is not None, frame
        elif frame["type"] == "message.stop" and "final_text" in frame:
            have = held(frame["final_text"])
        elif frame["type"] == "message.stop":  # with append: the rest of the text
            have = extended(have, frame["offset"], frame["text"])
            assert have is not None, frame
        else:
            continue
        texts[frame["seq"]] = have.text
    return texts


def kinds(device: Device) -> set[str]:
    return {f["type"] for f in device.frames}


async def test_a_device_that_asks_gets_appends_and_the_same_text_at_every_step(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text(*CHUNKS))
    server = await iris_server(streaming=STREAMING)
    appending = await server.connect(features=APPEND)
    classic = await server.connect()
    assert appending.frames[0]["features"] == ["append"]
    assert "features" not in classic.frames[0]  # doc 05's ready, unchanged
    await classic.send({"type": "message.send", "text": "go"})
    frames = await appending.turn()
    await classic.turn()
    assert "message.append" in kinds(appending) and "message.update" not in kinds(appending)
    assert "message.append" not in kinds(classic) and "message.update" in kinds(classic)
    by_append, by_snapshot = followed(frames), followed(classic.frames)
    for seq in by_append.keys() & by_snapshot.keys():
        assert by_append[seq] == by_snapshot[seq]
    assert by_append[max(by_append)] == REPLY.rstrip()
    stops = [next(f for f in d.frames if f["type"] == "message.stop") for d in (appending, classic)]
    assert stops[1]["final_text"] == REPLY.rstrip()  # doc 05: always the final text
    assert by_append[stops[0]["seq"]] == REPLY.rstrip()
    # Linear, not quadratic: the appends carried the streamed text once.
    streamed = max((f for f in frames if f["type"] == "message.append"), key=lambda f: f["seq"])
    carried = sum(len(f["text"]) for f in frames if f["type"] == "message.append")
    assert carried == len(by_append[streamed["seq"]])


async def test_features_in_the_query_with_a_header_token(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("one ", "two ", "three"))
    server = await iris_server(streaming=STREAMING)
    device = await server.connect(header=True, features=["append", "later-feature"])
    assert device.frames[0]["features"] == ["append"]  # unknown names are ignored
    other = await server.connect()
    await other.send({"type": "message.send", "text": "go"})
    frames = await device.turn()
    assert followed(frames)[max(followed(frames))] == "one two three"
    assert "message.update" not in kinds(device)
    refused = await server.connect(header=True, features=["x" * 65], ready=False)
    assert await refused.closed() == 4400


async def test_a_bad_features_list_in_hello_is_refused(iris_server: StartServer) -> None:
    server = await iris_server(streaming=STREAMING)
    device = await server.connect(None, ready=False)
    await device.send({"type": "hello", "token": "iris-device-token-t1", "features": "append"})
    assert await device.closed() == 4400  # a bad field of a hello, not a refused token


async def test_a_rewrite_sends_a_snapshot(iris_server: StartServer, upstream: FakeUpstream) -> None:
    backup = {"name": "backup-model", "base_url": upstream.base_url, "api_key": "sk-test"}
    upstream.script(drop("Half an answer ", "cut"), text("A whole ", "answer"))
    server = await iris_server(streaming=STREAMING, model={"fallback": [backup]})
    appending = await server.connect(features=APPEND)
    classic = await server.connect()
    await classic.send({"type": "message.send", "text": "go"})
    frames = await appending.turn()
    await classic.turn()
    texts = followed(frames)
    assert texts[max(texts)] == "A whole answer"
    # The shown text was replaced: that frame is a whole snapshot, not an append.
    assert any(f["type"] == "message.update" for f in frames)
    by_snapshot = followed(classic.frames)
    for seq in texts.keys() & by_snapshot.keys():
        assert texts[seq] == by_snapshot[seq]


async def test_resume_mid_message_is_one_snapshot_then_appends(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    rest = "and part two, longer than the 48-character cadence"
    upstream.script(gated("part one ", rest, after=1))
    server = await iris_server(streaming=STREAMING)
    first = await server.connect(features=APPEND)
    await first.send({"type": "message.send", "text": "go"})
    started = (await first.until("message.start"))[-1]
    await first.until("message.append")
    late = await server.connect(features=APPEND, after_seq=started["seq"])
    snapshot = await late.until("message.update")
    assert snapshot[-1]["text"] == "part one "
    upstream.release()
    frames = await late.turn()
    appends = [f for f in frames if f["type"] == "message.append"]
    assert [(f["offset"], f["text"]) for f in appends] == [(9, rest)]
    assert "message.update" not in {f["type"] for f in frames}
    # The appends brought the whole final text: the stop does not repeat it.
    stop = next(f for f in frames if f["type"] == "message.stop")
    assert "final_text" not in stop and (stop["offset"], stop["text"]) == (59, "")
    assert followed(late.frames)[stop["seq"]] == "part one " + rest
    await first.turn()

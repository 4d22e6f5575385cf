"""Bad input and authentication on the real socket: errors with codes, nothing else disturbed."""

from __future__ import annotations

import json

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from iris.protocol import inbound
from tests.fakes.upstream import FakeUpstream, gated, text
from tests.socket.conftest import TOKEN, WAIT, StartServer

STREAMING = {"enabled": True}

BAD_FRAMES = [
    ("{not json", "bad_json"),
    (b"\xff\xfe", "bad_json"),
    ("[1, 2]", "bad_frame"),
    ('{"text": "no type"}', "bad_frame"),
    ('{"type": "message.delete"}', "unknown_type"),
    ('{"type": "message.send"}', "missing_field"),
    ('{"type": "message.send", "text": 5}', "bad_field"),
    ('{"type": "message.send", "text": "   "}', "bad_field"),
    ('{"type": "message.send", "text": "hi", "chat_id": "no spaces allowed"}', "bad_field"),
    ('{"type": "message.send", "text": "hi", "chat_id": "other"}', "wrong_chat"),
    ('{"type": "message.send", "text": "' + "x" * 101 + '"}', "too_large"),
    ('{"type": "resume"}', "missing_field"),
    ('{"type": "resume", "after_seq": -1}', "bad_field"),
    ('{"type": "resume", "after_seq": true}', "bad_field"),
    ('{"type": "hello", "token": "t1"}', "unexpected_hello"),
    ('{"type": "resume", "after_seq": 9223372036854775808}', "bad_field"),  # past SQLite's int
    ('{"type": "message.send", "text": "a lone \\ud800 surrogate"}', "bad_field"),
    pytest.param("[" * 100_000 + "]" * 100_000, "bad_json", id="nested-100000-deep"),
    pytest.param(
        '{"type": "ping", "x": ' + '{"a":' * 50_000 + "1" + "}" * 50_001,
        "bad_json",
        id="deep-field",
    ),
]


@pytest.mark.parametrize(("raw", "code"), BAD_FRAMES)
async def test_each_bad_frame_gets_an_error_and_the_connection_stays_usable(
    iris_server: StartServer, raw: str | bytes, code: str
) -> None:
    server = await iris_server(streaming=STREAMING, iris={"max_text": 100})
    device = await server.connect()
    await device.ws.send(raw)
    frame = await device.recv()
    assert frame["type"] == "error" and frame["code"] == code and frame["message"]
    await device.send({"type": "ping"})
    pong = await device.recv()
    assert pong["type"] == "pong" and pong["seq"] == frame["seq"]


async def test_bad_input_does_not_disturb_a_running_turn_or_other_devices(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(gated("steady ", "reply", after=1))
    server = await iris_server(streaming=STREAMING)
    sender, other = await server.connect(), await server.connect()
    await sender.send({"type": "message.send", "text": "go"})
    await sender.until("message.update")
    for _ in range(5):
        await sender.ws.send("garbage")
    errors = [await sender.recv() for _ in range(5)]
    assert {f["code"] for f in errors} == {"bad_json"}
    upstream.release()
    frames = await sender.turn()
    assert frames[-2]["final_text"] == "steady reply"
    seen_by_other = await other.turn()
    assert "error" not in [f["type"] for f in seen_by_other]  # errors are the sender's own


async def test_more_than_20_bad_frames_a_minute_closes_with_1008(iris_server: StartServer) -> None:
    server = await iris_server(streaming=STREAMING)
    device = await server.connect()
    for _ in range(20):
        await device.ws.send("nope")
    for _ in range(20):
        assert (await device.recv())["code"] == "bad_json"
    await device.ws.send("one too many")
    assert await device.closed() == 1008


@pytest.mark.parametrize(
    "first",
    [
        '{"type": "hello", "token": "wrong"}',
        '{"type": "hello"}',
        '{"type": "ping"}',
        "not even json",
    ],
)
async def test_bad_or_missing_token_closes_with_4401_and_sends_nothing(
    iris_server: StartServer, first: str
) -> None:
    server = await iris_server(streaming=STREAMING)
    device = await server.connect(None, ready=False)
    await device.ws.send(first)
    assert await device.closed() == 4401
    assert device.frames == []


async def test_bad_bearer_header_closes_with_4401(iris_server: StartServer) -> None:
    server = await iris_server(streaming=STREAMING)
    async with connect(
        server.url, additional_headers={"Authorization": "Bearer nope"}, open_timeout=WAIT
    ) as ws:
        with pytest.raises(ConnectionClosed):
            await ws.recv()
        assert ws.close_code == 4401


async def test_bearer_header_and_hello_both_authenticate(iris_server: StartServer) -> None:
    server = await iris_server(streaming=STREAMING)
    by_header = await server.connect(header=True)
    by_hello = await server.connect(chat_id="work")
    epoch = by_header.frames[0]["epoch"]  # the chat log's (one SQLite file: one epoch)
    assert by_header.frames[0] == {"type": "ready", "chat_id": "main", "seq": 0, "epoch": epoch}
    assert by_hello.frames[0] == {"type": "ready", "chat_id": "work", "seq": 0, "epoch": epoch}


async def test_with_no_tokens_configured_every_device_is_refused(
    iris_server: StartServer,
) -> None:
    server = await iris_server(streaming=STREAMING, iris={"tokens": []})
    device = await server.connect(None, ready=False)
    await device.send({"type": "hello"})
    with pytest.raises(ConnectionClosed) as closed:
        await device.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
    device = await server.connect(None, ready=False)
    await device.send({"type": "hello", "token": ""})
    with pytest.raises(ConnectionClosed) as closed:
        await device.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


def test_parse_accepts_the_documented_requests() -> None:
    parse = inbound.parse
    assert parse('{"type":"ping"}', max_text=10) == inbound.Ping()
    assert parse('{"type":"turn.cancel"}', max_text=10) == inbound.CancelTurn()
    assert parse('{"type":"resume","after_seq":7}', max_text=10) == inbound.Resume(7)
    assert parse('{"type":"message.send","text":"hi","chat_id":"c"}', max_text=10) == (
        inbound.SendMessage("hi", "c")
    )
    assert parse('{"type":"hello","token":"t","after_seq":3}', max_text=10) == inbound.Hello(
        "t", None, 3
    )


async def test_bearer_header_takes_chat_and_resume_point_from_the_query(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("noted"))
    server = await iris_server(streaming=STREAMING)
    first = await server.connect(chat_id="work")
    await first.send({"type": "message.send", "text": "remember this"})
    await first.turn()
    async with connect(
        f"{server.url}?chat_id=work&after_seq=0",
        additional_headers={"Authorization": f"Bearer {TOKEN}"},
        open_timeout=WAIT,
    ) as ws:
        frames = [json.loads(await ws.recv()) for _ in range(2)]
    assert frames[0] == {"type": "ready", "chat_id": "work", "seq": 0, "epoch": frames[0]["epoch"]}
    assert frames[1]["type"] == "message" and frames[1]["text"] == "remember this"


@pytest.mark.parametrize(
    "query", ["after_seq=%C2%B2", "after_seq=-1", "after_seq=x", "chat_id=a%20b"]
)
async def test_a_bad_query_value_closes_with_4400_naming_it(
    iris_server: StartServer, query: str
) -> None:
    server = await iris_server(streaming=STREAMING)
    async with connect(
        f"{server.url}?{query}",
        additional_headers={"Authorization": f"Bearer {TOKEN}"},
        open_timeout=WAIT,
    ) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4400
    assert query.split("=")[0] in closed.value.rcvd.reason


async def test_a_lone_surrogate_in_a_hello_token_is_refused_with_4401(
    iris_server: StartServer,
) -> None:
    server = await iris_server(streaming=STREAMING)
    device = await server.connect(None, ready=False)
    await device.ws.send('{"type": "hello", "token": "t\\ud800"}')
    assert await device.closed() == 4401
    assert device.frames == []


async def test_a_device_that_never_says_hello_is_closed_with_4401(
    iris_server: StartServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("iris.surfaces.socket.endpoint.HELLO_TIMEOUT", 0.2)
    server = await iris_server(streaming=STREAMING)
    device = await server.connect(None, ready=False)
    assert await device.closed() == 4401
    assert device.frames == []

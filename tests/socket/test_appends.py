"""Append frames: the offset unit, the per-device conversion, and the queue that feeds it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from iris.fanout.framelog import SqliteFrameLog
from iris.fanout.hub import Hub
from iris.fanout.subscription import encode_frame
from iris.protocol import inbound
from iris.protocol.appends import AppendWriter, Held, extended, held, utf16_len
from iris.protocol.types import RULES
from iris.state.sqlite import Store
from tests.socket.conftest import SERVER_FRAME
from tests.socket.fanout_plans import drain, update

# What a browser's ``"…".length`` says for each (UTF-16 code units).
JS_LENGTH = [
    ("hello", 5),
    ("😀", 2),  # outside the BMP: a surrogate pair
    ("👍🏽", 4),  # emoji + skin-tone modifier: two astral code points
    ("👨‍👩‍👧", 8),  # a ZWJ family: 3 astral + 2 joiners
    ("e\u0301", 2),  # e + combining acute: one grapheme, two units
    ("中文字", 3),  # CJK in the BMP: one unit each
    ("𠀋", 2),  # CJK extension B: astral
    ("\ud800", 1),  # a lone surrogate: one unit here, one U+FFFD on the wire
]


@pytest.mark.parametrize(("text", "units"), JS_LENGTH)
def test_offsets_count_utf16_code_units_as_javascript_does(text: str, units: int) -> None:
    assert utf16_len(text) == units
    # ... and the same count survives the wire (a lone surrogate becomes one U+FFFD).
    wired = json.loads(encode_frame({"text": text}))["text"]
    assert len(wired.encode("utf-16-le")) // 2 == units


def frame(kind: str, message_id: str, seq: int, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "message_id": message_id, "chat_id": "c", "seq": seq, **fields}


def test_a_device_that_follows_from_the_start_gets_appends_with_utf16_offsets() -> None:
    writer = AppendWriter()
    assert writer.convert(frame("message.start", "m", 1, role="assistant")) is None
    texts = ["中文", "中文 😀", "中文 😀 e\u0301", "中文 😀 e\u0301 done"]
    got = [writer.convert(frame("message.update", "m", n + 2, text=t)) for n, t in enumerate(texts)]
    assert [(a["offset"], a["text"]) for a in got if a is not None] == [
        (0, "中文"),
        (2, " 😀"),
        (5, " e\u0301"),
        (8, " done"),
    ]
    for append in got:
        SERVER_FRAME.validate(append)
    # The final text extends what the device holds: the stop brings only the rest.
    stop = writer.convert(frame("message.stop", "m", 9, final_text=texts[-1] + "!", model="x"))
    assert stop == frame("message.stop", "m", 9, model="x", offset=13, text="!")
    SERVER_FRAME.validate(stop)
    assert len(writer) == 0  # nothing kept per closed message


def test_a_stop_whose_final_text_differs_carries_it() -> None:
    writer = AppendWriter()
    writer.convert(frame("message.start", "m", 1, role="assistant"))
    writer.convert(frame("message.update", "m", 2, text="<think>x</think>Hi"))
    assert writer.convert(frame("message.stop", "m", 3, final_text="Hi")) is None  # rewritten
    # A device that joined after the last update holds nothing: the stop is sent whole.
    assert writer.convert(frame("message.stop", "n", 4, final_text="Hi")) is None


def test_a_rewrite_or_a_device_that_joined_late_gets_a_snapshot() -> None:
    writer = AppendWriter()
    assert writer.convert(frame("message.update", "m", 1, text="Hello")) is None  # joined late
    append = writer.convert(frame("message.update", "m", 2, text="Hello wor"))
    assert append is not None and (append["offset"], append["text"]) == (5, " wor")
    assert writer.convert(frame("message.update", "m", 3, text="")) is None  # a reset
    assert writer.convert(frame("message.update", "m", 4, text="Hi")) == frame(
        "message.append", "m", 4, offset=0, text="Hi"
    )
    writer.forget()  # resume / sync
    assert writer.convert(frame("message.update", "m", 5, text="Hi there")) is None


def test_a_cut_inside_a_surrogate_pair_gets_a_snapshot() -> None:
    writer = AppendWriter()
    writer.convert(frame("message.start", "m", 1, role="assistant"))
    assert writer.convert(frame("message.update", "m", 2, text="a\ud83d")) is not None
    # Sent whole, the pair joins into 😀; sent as an append it would be two U+FFFD.
    assert writer.convert(frame("message.update", "m", 3, text="a\ud83d\ude00")) is None


def test_a_device_applies_an_append_only_where_it_fits() -> None:
    have = held("中文 😀")
    assert extended(have, 5, "!") == Held("中文 😀!", 6)
    assert extended(have, 4, "!") is None  # counted in code points: refused
    assert extended(None, 0, "x") is None  # a message it does not hold


def hub_on(tmp_path: Path, queue_size: int = 256) -> Hub:
    return Hub(SqliteFrameLog(Store(tmp_path / "iris.db"), rules=RULES), queue_size=queue_size)


def start(message_id: str) -> dict[str, Any]:
    return {"type": "message.start", "message_id": message_id, "role": "assistant"}


async def test_a_slow_device_gets_the_skipped_snapshots_as_one_append(tmp_path: Path) -> None:
    hub = hub_on(tmp_path)
    device, classic = hub.subscribe("c", writer=AppendWriter()), hub.subscribe("c")
    hub.publish("c", start("m"))
    hub.publish("c", update("m", "one"))
    assert [f["type"] for f in await drain(device)] == ["message.start", "message.append"]
    await drain(classic)
    for text in ("one two", "one two three", "one two three four"):
        hub.publish("c", update("m", text))
    hub.publish("c", {"type": "tool.start", "index": 1, "name": "t", "preview": "", "args": {}})
    hub.publish("c", update("m", "one two three four five"))
    got = await drain(device)
    # Newest wins; the tool frame is kept; one append merges the four skipped snapshots.
    assert [(f["type"], f.get("offset"), f.get("text")) for f in got] == [
        ("tool.start", None, None),
        ("message.append", 3, " two three four five"),
    ]
    # A device that did not ask keeps today's frames exactly.
    assert [(f["type"], f.get("text")) for f in await drain(classic)] == [
        ("tool.start", None),
        ("message.update", "one two three four five"),
    ]


async def test_resume_mid_message_sends_one_snapshot_then_appends(tmp_path: Path) -> None:
    hub = hub_on(tmp_path)
    hub.publish("c", start("m"))
    hub.publish("c", update("m", "one"))
    hub.publish("c", update("m", "one two"))
    device = hub.subscribe("c", writer=AppendWriter())
    device.resume(0)
    got = await drain(device)
    hub.publish("c", update("m", "one two three"))
    got += await drain(device)
    assert [(f["type"], f.get("text")) for f in got] == [
        ("message.start", None),
        ("message.append", "one two"),  # the replay follows the message from its start
        ("message.append", " three"),
    ]
    device.resume(2)  # asked again mid-message (say, after a mismatch): a snapshot first
    got = await drain(device)
    hub.publish("c", update("m", "one two three four"))
    got += await drain(device)
    assert [(f["type"], f.get("text")) for f in got] == [
        ("message.update", "one two three"),
        ("message.append", " four"),
    ]


async def test_a_sync_is_followed_by_a_snapshot(tmp_path: Path) -> None:
    hub = hub_on(tmp_path)
    hub.publish("c", start("m"))
    hub.publish("c", update("m", "one"))
    device = hub.subscribe("c", writer=AppendWriter())
    device.resume(99)  # from the future: a sync with the message as it stands
    hub.publish("c", update("m", "one two"))
    got = await drain(device)
    assert [(f["type"], f.get("text")) for f in got] == [
        ("sync", None),
        ("message.update", "one two"),
    ]


async def test_an_overflowing_device_catches_up_with_appends_against_what_it_has(
    tmp_path: Path,
) -> None:
    hub = hub_on(tmp_path, queue_size=4)
    device = hub.subscribe("c", writer=AppendWriter())
    hub.publish("c", start("m"))
    hub.publish("c", update("m", "a"))
    await drain(device)
    text = "a"
    for n in range(10):  # tool frames cannot be dropped: the queue overflows to the log
        text += f" {n}"
        hub.publish("c", update("m", text))
        hub.publish("c", {"type": "tool.progress", "index": 1, "name": "t", "note": str(n)})
    assert device.catchups > 0
    shown = "a"
    for got in await drain(device):
        if got["type"] == "message.append":
            result = extended(held(shown), got["offset"], got["text"])
            assert result is not None
            shown = result.text
        elif got["type"] == "message.update":
            shown = got["text"]
    assert shown == text


def test_hello_features_are_parsed_and_checked() -> None:
    hello = inbound.parse('{"type":"hello","token":"t","features":["append","x"]}', max_text=9)
    assert hello == inbound.Hello("t", features=("append", "x"))
    assert inbound.parse('{"type":"hello","token":"t"}', max_text=9) == inbound.Hello("t")
    for bad in ('"append"', "[1]", '[""]', f'["{"x" * 65}"]', str(["a"] * 17).replace("'", '"')):
        got = inbound.parse(f'{{"type":"hello","token":"t","features":{bad}}}', max_text=9)
        assert got == inbound.BadFrame(
            "bad_field", got.message if isinstance(got, inbound.BadFrame) else ""
        )
    assert inbound.parse_features("append, later") == ("append", "later")
    assert inbound.parse_features("") == ()
    assert inbound.parse_features("x" * 65) is None

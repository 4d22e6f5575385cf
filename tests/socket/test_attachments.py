"""Files sent on the iris socket (``message.send {attachments}``): the model gets them as content
parts, or every device is told in one line; a bad file is refused with a clear code."""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.chat.attachments import images_in, photo, texts_in, user_content
from tests.fakes.upstream import FakeUpstream, text
from tests.socket.conftest import StartServer


def sent(kind: str, name: str, mime: str, data: bytes) -> dict[str, Any]:
    return {"kind": kind, "name": name, "mime": mime, "data_b64": base64.b64encode(data).decode()}


async def test_an_image_and_a_document_reach_a_vision_model(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("Two things."), text("Later."))
    server = await iris_server(model={"vision": True}, attachments={"max_edge": 300})
    device, other = await server.connect(), await server.connect()
    files = [
        sent("image", "cat.png", "image/png", photo(1200, 600, "PNG")),
        sent("file", "todo.txt", "text/plain", b"milk\neggs\n"),
    ]
    await device.send({"type": "message.send", "text": "look", "attachments": files})
    await device.turn()
    echo = await other.until("message", role="user")
    assert echo[-1]["text"] == "look\n[attached: cat.png, todo.txt]"
    content = user_content(upstream.requests[0].body)
    (image,) = images_in(content)
    assert image.size == (300, 150)
    assert texts_in(content) == 'look\n<file name="todo.txt">\nmilk\neggs\n\n</file>'
    await device.send({"type": "message.send", "text": "and?"})
    await device.turn()
    later = json.dumps(upstream.requests[1].body["messages"])
    assert "data:image" not in later and "[image cat.png: shown to the model" in later


async def test_without_vision_every_device_is_told_and_the_text_goes_through(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(text("Only text."))
    server = await iris_server()
    device = await server.connect()
    files = [sent("image", "cat.png", "image/png", photo(10, 10, "PNG"))]
    await device.send({"type": "message.send", "text": "see?", "attachments": files})
    frames = await device.turn()
    notes = [f["text"] for f in frames if f["type"] == "commentary"]
    assert notes == ["cat.png: this model does not see images (model.vision is off)"]
    content = user_content(upstream.requests[0].body)
    assert isinstance(content, str) and content.startswith("see?")


async def test_bad_files_are_refused_with_a_code_and_no_turn(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    server = await iris_server(attachments={"max_bytes": 2048})
    device = await server.connect()
    big = [sent("file", "big.txt", "text/plain", b"x" * 4096)]
    await device.send({"type": "message.send", "text": "hi", "attachments": big})
    error = (await device.until("error"))[-1]
    assert error["code"] == "too_large" and "big.txt" in error["message"]
    broken = [{"kind": "file", "name": "a.txt", "mime": "text/plain", "data_b64": "!!not base64"}]
    await device.send({"type": "message.send", "text": "hi", "attachments": broken})
    error = (await device.until("error"))[-1]
    assert error["code"] == "bad_attachment" and "a.txt" in error["message"]
    odd = [{"kind": "video", "name": "a", "mime": "", "data_b64": ""}]
    await device.send({"type": "message.send", "text": "hi", "attachments": odd})
    assert (await device.until("error"))[-1]["code"] == "bad_field"
    await device.send({"type": "message.send", "text": "  ", "attachments": []})
    assert (await device.until("error"))[-1]["code"] == "bad_field"
    assert not upstream.requests  # none of them reached the model


async def test_a_file_alone_starts_a_turn(iris_server: StartServer, upstream: FakeUpstream) -> None:
    upstream.script(text("A list."))
    server = await iris_server()
    device = await server.connect()
    files = [sent("file", "list.md", "text/markdown", b"- one\n")]
    await device.send({"type": "message.send", "text": "", "attachments": files})
    await device.turn()
    assert user_content(upstream.requests[0].body) == '<file name="list.md">\n- one\n\n</file>'

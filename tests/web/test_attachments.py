"""Files in the browser app: the attach button and paste put files on the next message, images
downscaled in the page, what cannot be sent refused there; the real server hands them to the
model. Real chromium, the real ``iris serve`` (a model that sees images), the scripted upstream."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.chat.attachments import images_in, photo, texts_in, user_content
from tests.fakes.upstream import text

from .conftest import Web, bubbles, send, settled, web_on

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    # The server keeps what the page sends (up to 4096 px): the 2048 px seen is the page's doing.
    sections = {"model": {"vision": True}, "attachments": {"max_edge": 4096}}
    with web_on(tmp_path_factory.mktemp("web"), **sections) as running:
        yield running


PASTE = """async () => {
  const canvas = document.createElement("canvas");
  canvas.width = 40; canvas.height = 20;
  const blob = await new Promise((done) => canvas.toBlob(done, "image/png"));
  const data = new DataTransfer();
  data.items.add(new File([blob], "pasted.png", { type: "image/png" }));
  const event = new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true });
  document.querySelector("#input").dispatchEvent(event);
}"""


def chips(page: object) -> list[str]:
    return page.eval_on_selector_all(  # type: ignore[attr-defined]
        "#attachments .chip", "(els) => els.map((e) => e.firstChild.textContent)"
    )


def test_the_attach_button_sends_files_with_the_message(app: Web) -> None:
    page = app.open("attach-button")
    files = [
        {"name": "wide.png", "mimeType": "image/png", "buffer": photo(3000, 1500, "PNG")},
        {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"buy milk\n"},
    ]
    page.set_input_files("#attach-input", files=files)
    page.wait_for_function("() => document.querySelectorAll('#attachments .chip').length === 2")
    assert chips(page) == ["wide.png", "notes.txt"]
    app.upstream.script(text("Saw both."))
    send(page, "look at these")
    settled(page, 2)
    assert [b["text"].strip() for b in bubbles(page)] == [
        "look at these\n[attached: wide.png, notes.txt]",
        "Saw both.",
    ]
    assert page.is_hidden("#attachments")  # the chips went with the message
    content = user_content(app.upstream.requests[-1].body)
    (image,) = images_in(content)
    assert image.size == (2048, 1024)  # downscaled in the page, before it was sent
    assert texts_in(content) == 'look at these\n<file name="notes.txt">\nbuy milk\n\n</file>'


def test_a_pasted_image_goes_with_the_next_message(app: Web) -> None:
    page = app.open("attach-paste")
    page.evaluate(PASTE)
    page.wait_for_function("() => document.querySelectorAll('#attachments .chip').length === 1")
    assert page.input_value("#input") == ""  # the file, not its name, was pasted
    app.upstream.script(text("A blank image."))
    send(page, "what is it?")
    settled(page, 2)
    (image,) = images_in(user_content(app.upstream.requests[-1].body))
    assert image.size == (40, 20)


def test_a_file_too_large_for_the_socket_is_refused_in_the_page(app: Web) -> None:
    page = app.open("attach-large")
    blob = {
        "name": "dump.bin",
        "mimeType": "application/octet-stream",
        "buffer": os.urandom(2_000_000),
    }
    page.set_input_files("#attach-input", files=[blob])
    problem = page.wait_for_selector("#attachments .chip.problem")
    assert problem is not None and problem.text_content().startswith("dump.bin: too large to send")
    assert page.evaluate("() => window.__iris.connection.connected")  # the socket stays open

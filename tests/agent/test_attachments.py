"""What files become for the model (``iris.agent.attachments``), and how each provider puts
content parts on the wire (the official SDK against the scripted upstream)."""

from __future__ import annotations

import base64
import io
import warnings

import pytest
from PIL import Image

from iris.agent.attachments import File, image_url, prepare, without_old_images
from iris.agent.context import IMAGE_CHARS, message_chars, transcript
from iris.config import ModelEndpoint
from iris.llm.chat_completions import ChatCompletionsProvider
from iris.llm.provider import ProviderRequest
from iris.llm.responses_api import ResponsesProvider
from tests.agent.images import vision
from tests.chat.attachments import images_in, photo
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, text

DOT = "data:image/png;base64," + base64.b64encode(photo(4, 4, "PNG")).decode()
PARTS = [{"type": "text", "text": "what is it?"}, {"type": "image_url", "image_url": {"url": DOT}}]


async def test_chat_completions_sends_image_url_parts(upstream: FakeUpstream) -> None:
    upstream.script(text("A dot."))
    endpoint = ModelEndpoint(base_url=upstream.base_url, api_key="sk", name="fake-model")
    provider = ChatCompletionsProvider(endpoint)
    request = ProviderRequest("fake-model", [{"role": "user", "content": PARTS}])
    try:
        assert [d async for d in provider.stream(request)]
    finally:
        await provider.aclose()
    assert upstream.requests[0].body["messages"] == [{"role": "user", "content": PARTS}]


async def test_responses_sends_input_text_and_input_image(upstream: FakeUpstream) -> None:
    upstream.script(text("A dot."))
    endpoint = ModelEndpoint(
        provider="responses", base_url=upstream.base_url, api_key="sk", name="fake-model"
    )
    provider = ResponsesProvider(endpoint)
    request = ProviderRequest("fake-model", [{"role": "user", "content": PARTS}])
    try:
        assert [d async for d in provider.stream(request)]
    finally:
        await provider.aclose()
    assert upstream.requests[0].path == "/v1/responses"
    assert upstream.requests[0].body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "what is it?"},
                {"type": "input_image", "image_url": DOT, "detail": "auto"},
            ],
        }
    ]


async def test_an_image_is_inline_downscaled_and_kept_as_a_placeholder(
    make_config: MakeConfig,
) -> None:
    config = vision(make_config, max_edge=100)
    prepared = await prepare(config, "hi", [File("image", "a.png", "image/png", photo(400, 200))])
    (image,) = images_in(prepared.content)
    assert image.size == (100, 50) and image.format == "JPEG"  # opaque: JPEG
    assert (
        prepared.stored == "hi\n\n[image a.png: shown to the model with the message it came with]"
    )
    assert prepared.notes == []


def test_transparency_stays_png_and_small_jpegs_go_as_they_are() -> None:
    clear = Image.new("RGBA", (300, 300), (0, 0, 0, 0))
    out = io.BytesIO()
    clear.save(out, "PNG")
    url = image_url(out.getvalue(), 100)
    assert url.startswith("data:image/png;base64,")
    small = photo(50, 50)
    assert image_url(small, 100) == "data:image/jpeg;base64," + base64.b64encode(small).decode()


def test_what_is_not_an_image_or_a_bomb_is_refused_with_a_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValueError, match="not an image"):
        image_url(b"GIF89a but not really", 100)
    # Past Pillow's pixel limit (89 M by default; lowered so the test stays small).
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 5_000)
    for pixels in (100, 200):  # over the limit (a warning), over twice it (an error)
        with warnings.catch_warnings(), pytest.raises(ValueError, match="too many pixels"):
            image_url(photo(pixels, pixels, "PNG"), 100)


async def test_files_become_text_or_a_line_never_nothing(make_config: MakeConfig) -> None:
    config = make_config(
        "http://127.0.0.1:9/v1", attachments={"max_text_bytes": 16, "max_bytes": 2048}
    )
    files = [
        File("file", "ok.txt", "text/plain", b"short"),
        File("file", "long.txt", "text/plain", b"x" * 17),
        File("file", "latin.txt", "text/plain", "caf\xe9".encode("latin-1")),
        File("file", "a.pdf", "application/pdf", b"%PDF-1.7"),
        File("image", "big.jpg", "image/jpeg", b"x" * 4096),
        File("image", "p.jpg", "image/jpeg", photo(8, 8)),
    ]
    prepared = await prepare(config, "", files)
    assert prepared.notes == [
        "long.txt: too long to attach as text (17 bytes; the limit is 16)",
        "latin.txt: can't read this kind of file (text/plain; not UTF-8 text)",
        "a.pdf: can't read this kind of file (application/pdf)",
        "big.jpg: too large (4096 bytes; the limit is 2048)",
        "p.jpg: this model does not see images (model.vision is off)",
    ]
    assert isinstance(prepared.content, str)  # no image part: a plain string, as before
    assert prepared.content.startswith('<file name="ok.txt">\nshort\n</file>')
    assert prepared.content.count("[attachment not included: ") == 5


async def test_the_embedded_model_never_gets_images(make_config: MakeConfig) -> None:
    config = make_config(model={"provider": "local", "vision": True})
    prepared = await prepare(config, "x", [File("image", "p.jpg", "image/jpeg", photo(8, 8))])
    assert prepared.notes == ["p.jpg: this model does not see images (model.vision is off)"]


def test_images_older_than_the_last_reply_leave_the_request() -> None:
    burst = {"role": "user", "content": PARTS}
    messages = [burst, {"role": "assistant", "content": "a dot"}, burst]
    trimmed = without_old_images(messages)
    assert trimmed[0]["content"].startswith("what is it?\n\n[image")
    assert trimmed[1:] == messages[1:]  # the newest still has its image


def test_an_image_counts_as_an_image_not_as_its_base64() -> None:
    big = "data:image/jpeg;base64," + "A" * 1_000_000
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "hey"},
            {"type": "image_url", "image_url": {"url": big}},
        ],
    }
    assert message_chars(message) == 3 + IMAGE_CHARS
    assert "AAAA" not in transcript([message], 10_000)  # the summarizer gets a mark

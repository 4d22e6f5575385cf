"""Telegram attachments end to end: photos, documents and voice notes sent to the bot reach the
model (or the user is told), through the real python-telegram-bot against ``FakeBotApi``'s
``getFile`` and file download."""

from __future__ import annotations

import json

import pytest

from tests.chat.attachments import images_in, photo, texts_in, user_content
from tests.chat.harness import running
from tests.chat.telegram.harness import CHAT, OWNER, config, telegram_config
from tests.conftest import MakeConfig
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, text

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]


async def test_a_photo_reaches_a_vision_model_inline_and_downscaled(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.script(text("A red and blue square."), text("Still red."))
    async with running(config(make_config, upstream, api)) as surface:
        api.user_sends_file(CHAT, OWNER, "photo", photo(800, 600), caption="what is this?")
        await api.wait_until(lambda: api.chat(CHAT) == ["A red and blue square."])
        await surface.idle()
        api.user_says(CHAT, OWNER, "and now?")
        await api.wait_until(lambda: len(api.chat(CHAT)) == 2)
        await surface.idle()
    first = upstream.requests[0].body
    content = user_content(first)
    assert texts_in(content) == "what is this?"
    (image,) = images_in(content)
    assert max(image.size) == 256 and image.size == (256, 192)  # downscaled, aspect kept
    raw = json.dumps(first)
    assert api.token not in raw and "/file/bot" not in raw  # never the platform's file URL
    assert api.file_downloads == ["photos/file_1"]
    # The next turn has the photo as a placeholder, not its bytes again.
    later = upstream.requests[1].body["messages"]
    assert "data:image" not in json.dumps(later)
    assert "[image photo_U1.jpg: shown to the model" in later[0]["content"]


async def test_a_model_that_does_not_see_images_gets_the_text_and_the_user_a_line(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.script(text("Answered the caption."))
    built = telegram_config(make_config, upstream, api)  # model.vision: false, the default
    async with running(built) as surface:
        api.user_sends_file(CHAT, OWNER, "photo", photo(), caption="caption text")
        await api.wait_until(lambda: len(api.chat(CHAT)) == 2)
        await surface.idle()
    note, reply = api.chat(CHAT)
    assert note == "photo_U1.jpg: this model does not see images (model.vision is off)"
    assert reply == "Answered the caption."
    content = user_content(upstream.requests[0].body)
    assert isinstance(content, str) and content.startswith("caption text")
    assert "data:image" not in content


async def test_documents_text_as_text_other_files_a_line(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.script(text("Read it."), text("Got it."))
    async with running(config(make_config, upstream, api)) as surface:
        notes = "# Plan\n\nship the attachments ✓\n".encode()
        api.user_sends_file(CHAT, OWNER, "document", notes, name="plan.md", mime="text/markdown")
        await api.wait_until(lambda: api.chat(CHAT) == ["Read it."])
        await surface.idle()
        blob = bytes(range(256)) * 4
        api.user_sends_file(
            CHAT, OWNER, "document", blob, name="a.bin", mime="application/octet-stream"
        )
        await api.wait_until(lambda: len(api.chat(CHAT)) == 3)
        await surface.idle()
    document = user_content(upstream.requests[0].body)
    assert document == '<file name="plan.md">\n# Plan\n\nship the attachments ✓\n\n</file>'
    assert api.chat(CHAT)[1] == "a.bin: can't read this kind of file (application/octet-stream)"
    assert "a.bin: can't read" in texts_in(user_content(upstream.requests[1].body))


async def test_a_voice_note_is_transcribed_through_the_provider(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.transcripts.append("remind me to buy milk")
    upstream.script(text("Noted: milk."))
    async with running(config(make_config, upstream, api, transcribe="whisper-1")) as surface:
        api.user_sends_file(CHAT, OWNER, "voice", b"OggS fake opus", mime="audio/ogg")
        await api.wait_until(lambda: api.chat(CHAT) == ["Noted: milk."])
        await surface.idle()
    (heard,) = upstream.transcriptions
    assert (heard.model, heard.data, heard.content_type) == (
        "whisper-1",
        b"OggS fake opus",
        "audio/ogg",
    )
    assert heard.authorization == "Bearer sk-test"
    content = user_content(upstream.requests[0].body)
    assert content == "[voice note voice_U1.ogg, transcribed]\nremind me to buy milk"


async def test_without_transcription_a_voice_note_is_a_line_never_dropped(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.script(text("I cannot hear it."))
    async with running(config(make_config, upstream, api)) as surface:
        api.user_sends_file(CHAT, OWNER, "voice", b"OggS", mime="audio/ogg")
        await api.wait_until(lambda: len(api.chat(CHAT)) == 2)
        await surface.idle()
    assert api.chat(CHAT)[0] == (
        "voice_U1.ogg: voice notes and audio are not transcribed here "
        "(attachments.transcribe is off)"
    )
    assert "not transcribed" in texts_in(user_content(upstream.requests[0].body))
    assert not upstream.transcriptions


async def test_a_file_that_cannot_be_downloaded_is_a_line_and_the_text_goes_through(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.script(text("Answered the text."), text("Answered again."))
    async with running(config(make_config, upstream, api, max_bytes=25_000_000)) as surface:
        # Reported over the cap: not downloaded at all.
        api.user_sends_file(CHAT, OWNER, "photo", photo(), caption="one", file_size=26_000_000)
        await api.wait_until(lambda: len(api.chat(CHAT)) == 2)
        await surface.idle()
        # Under the cap, but over what the Bot API serves (getFile: "file is too big").
        big = 21 * 1024 * 1024
        api.user_sends_file(
            CHAT, OWNER, "document", b"x", name="big.txt", caption="two", file_size=big
        )
        await api.wait_until(lambda: len(api.chat(CHAT)) == 4)
        await surface.idle()
    assert api.chat(CHAT)[0] == "photo_U1.jpg: too large (26000000 bytes; the limit is 25000000)"
    assert api.file_downloads == []
    assert api.chat(CHAT)[2].startswith("big.txt: could not be downloaded: telegram: ")
    assert "too big" in api.chat(CHAT)[2].lower()
    assert texts_in(user_content(upstream.requests[0].body)).startswith("one")
    assert texts_in(user_content(upstream.requests[1].body)).startswith("two")


async def test_an_album_is_one_turn_that_sees_every_photo_once(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    # An album arrives as one message per photo; within the debounce they are one turn.
    upstream.script(text("Two squares."), text("Yes."))
    burst = {"debounce": 1.5}  # the default, which the harness turns off
    async with running(config(make_config, upstream, api, burst)) as surface:
        api.user_sends_file(CHAT, OWNER, "photo", photo(300, 300), caption="compare")
        api.user_sends_file(CHAT, OWNER, "photo", photo(200, 100))
        await api.wait_until(lambda: api.chat(CHAT) == ["Two squares."])
        await surface.idle()
        api.user_says(CHAT, OWNER, "sure?")
        await api.wait_until(lambda: len(api.chat(CHAT)) == 2)
        await surface.idle()
    first = [m for m in upstream.requests[0].body["messages"] if m["role"] == "user"]
    assert [[i.size for i in images_in(m["content"])] for m in first] == [
        [(256, 256)],
        [(200, 100)],  # under max_edge: as it was
    ]
    later = json.dumps(upstream.requests[1].body["messages"])
    assert "data:image" not in later
    assert later.count("[image photo_U2.jpg: shown") == 1 and later.count("[image: shown") == 1

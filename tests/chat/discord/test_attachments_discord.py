"""Discord attachments end to end: files of a MESSAGE_CREATE fetched from their CDN URLs (no
token sent there) through the real adapter, and what the model gets of them."""

from __future__ import annotations

import json

import pytest

from iris.surfaces.chat.runner import ChatSurface
from tests.chat.attachments import images_in, photo, texts_in, user_content
from tests.chat.discord.harness import OWNER, contents
from tests.chat.harness import platform_config, running
from tests.conftest import MakeConfig
from tests.fakes.discord_api import DiscordAPI
from tests.fakes.discord_gateway import (
    CHANNEL_ID,
    DiscordGateway,
    message_create,
)
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(20)


async def test_files_of_a_message_reach_the_model_or_the_user_is_told(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    api: DiscordAPI,
    gateway: DiscordGateway,
) -> None:
    settings = {
        "token": api.token,
        "base_url": api.base_url,
        "allowed_users": [OWNER],
        "groups": {"respond": "all"},  # a channel message: no mention needed here
    }
    config = platform_config(
        make_config,
        upstream,
        "discord",
        settings,
        model={"vision": True},
        attachments={"max_edge": 200, "transcribe": "whisper-1"},
    )
    upstream.transcripts.append("it is raining")
    upstream.script(text("Seen and heard."))
    message = message_create(OWNER, "<- these")
    message["attachments"] = [
        api.attachment(CHANNEL_ID, "shot.png", "image/png", photo(400, 400, "PNG")),
        api.attachment(CHANNEL_ID, "notes.txt", "text/plain; charset=utf-8", b"line one\n"),
        api.attachment(CHANNEL_ID, "voice-message.ogg", "audio/ogg", b"OggS", voice=True),
        api.attachment(CHANNEL_ID, "clip.mp4", "video/mp4", b"\x00\x00\x00 ftyp"),
    ]
    async with running(config) as surface:
        assert isinstance(surface, ChatSurface)
        await gateway.dispatch("MESSAGE_CREATE", message)
        await api.wait_until(lambda: "Seen and heard." in contents(api))
        await surface.idle()
    assert contents(api) == [
        "clip.mp4: can't read this kind of file (video/mp4)",
        "Seen and heard.",
    ]
    assert len(api.cdn_requests) == 4
    assert all("Authorization" not in headers for _, headers in api.cdn_requests)
    content = user_content(upstream.requests[0].body)
    (image,) = images_in(content)
    assert image.size == (200, 200)
    said = texts_in(content)
    assert said.startswith('<- these\n<file name="notes.txt">\nline one\n\n</file>')
    assert "[voice note voice-message.ogg, transcribed]\nit is raining" in said
    assert "clip.mp4: can't read" in said
    assert "/attachments/" not in json.dumps(upstream.requests[0].body)  # inline, not the URL
    assert upstream.transcriptions[0].data == b"OggS"


async def test_a_file_gone_from_the_cdn_is_a_line_and_the_text_goes_through(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    api: DiscordAPI,
    gateway: DiscordGateway,
) -> None:
    settings = {
        "token": api.token,
        "base_url": api.base_url,
        "allowed_users": [OWNER],
        "groups": {"respond": "all"},  # a channel message: no mention needed here
    }
    config = platform_config(make_config, upstream, "discord", settings)
    upstream.script(text("Text only."))
    message = message_create(OWNER, "read this")
    gone = api.attachment(CHANNEL_ID, "a.txt", "text/plain", b"x")
    api.files.clear()  # its URL expired
    message["attachments"] = [gone]
    async with running(config) as surface:
        await gateway.dispatch("MESSAGE_CREATE", message)
        await api.wait_until(lambda: "Text only." in contents(api))
        await surface.idle()
    assert (
        contents(api)[0] == "a.txt: could not be downloaded: discord: the attachment answered 404"
    )
    assert texts_in(user_content(upstream.requests[0].body)).startswith("read this")

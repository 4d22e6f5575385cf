"""WhatsApp attachments end to end: a media message's caption is its text and its medium is
fetched the Cloud API way (``GET {media-id}``, then the media URL with the access token), by
the real adapter in ``iris serve``'s app against the ``WhatsAppAPI`` stand-in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from iris.runtime import Runtime
from iris.server.asgi import build_app
from iris.surfaces.chat.platforms.whatsapp import WEBHOOK_PATH
from iris.surfaces.chat.runner import ChatSurface
from tests.chat.attachments import images_in, photo, texts_in, user_content
from tests.chat.harness import platform_config
from tests.conftest import MakeConfig
from tests.fakes import loopback
from tests.fakes.upstream import FakeUpstream, text
from tests.fakes.whatsapp_api import WhatsAppAPI

pytestmark = pytest.mark.timeout(20)

OWNER = "15550001111"


@dataclass
class Served:
    url: str
    chat: ChatSurface


async def serve(
    make_config: MakeConfig, upstream: FakeUpstream, api: WhatsAppAPI, **sections: Any
) -> AsyncIterator[Served]:
    settings = {
        "base_url": api.base_url,
        "phone_number_id": api.phone_number_id,
        "access_token": api.token,
        "app_secret": api.app_secret,
        "allowed_users": [OWNER],
        "budgets": {"pair": {"calls": 10, "per": 1.0}},  # the stand-in has no pair limit here
    }
    config = platform_config(make_config, upstream, "whatsapp", settings, **sections)
    runtime = Runtime.create(config)
    app = build_app(config, runtime)
    [chat] = [s for s in app.state.surfaces if isinstance(s, ChatSurface)]
    sock = loopback.bind()
    server = await loopback.start(app, sock)
    try:
        yield Served(f"http://127.0.0.1:{sock.getsockname()[1]}{WEBHOOK_PATH}", chat)
    finally:
        await loopback.stop(server)
        runtime.store.close()


async def test_a_photo_with_a_caption_reaches_a_vision_model_inline(
    make_config: MakeConfig, upstream: FakeUpstream, api: WhatsAppAPI
) -> None:
    upstream.script(text("A red and blue square."))
    sections = {"model": {"vision": True}, "attachments": {"max_edge": 100}}
    async for served in serve(make_config, upstream, api, **sections):
        status, _ = await api.user_sends(
            served.url, OWNER, "image", photo(300, 150), "image/jpeg", caption="what is this?"
        )
        assert status == 200
        await api.wait_until(lambda: api.texts_to(OWNER) == ["A red and blue square."])
        await served.chat.idle()
    [(media_id, auth)] = api.media_fetches
    assert media_id in api.media and auth == f"Bearer {api.token}"
    content = user_content(upstream.requests[0].body)
    (image,) = images_in(content)
    assert image.size == (100, 50)
    assert texts_in(content) == "what is this?"


async def test_a_voice_note_is_transcribed_through_the_provider(
    make_config: MakeConfig, upstream: FakeUpstream, api: WhatsAppAPI
) -> None:
    upstream.transcripts.append("remind me to buy milk")
    upstream.script(text("Noted: milk."))
    sections = {"attachments": {"transcribe": "whisper-1"}}
    async for served in serve(make_config, upstream, api, **sections):
        _, _ = await api.user_sends(
            served.url, OWNER, "audio", b"OggS fake opus", "audio/ogg; codecs=opus", voice=True
        )
        await api.wait_until(lambda: api.texts_to(OWNER) == ["Noted: milk."])
        await served.chat.idle()
    (heard,) = upstream.transcriptions
    assert (heard.model, heard.data, heard.content_type) == (
        "whisper-1",
        b"OggS fake opus",
        "audio/ogg",
    )
    [media_id] = list(api.media)
    content = user_content(upstream.requests[0].body)
    assert content == f"[voice note voice_{media_id}.ogg, transcribed]\nremind me to buy milk"


async def test_a_medium_that_cannot_be_downloaded_is_a_line_and_the_caption_goes_through(
    make_config: MakeConfig, upstream: FakeUpstream, api: WhatsAppAPI
) -> None:
    upstream.script(text("Caption only."))
    async for served in serve(make_config, upstream, api):
        await api.user_sends(
            served.url,
            OWNER,
            "document",
            b"%PDF-1.4",
            "application/pdf",
            caption="see the plan",
            filename="plan.pdf",
            media_id="999999",  # expired: Meta keeps media 30 days
        )
        await api.wait_until(lambda: "Caption only." in api.texts_to(OWNER))
        await served.chat.idle()
    note = api.texts_to(OWNER)[0]
    assert note.startswith("plan.pdf: could not be downloaded: whatsapp: the media answered")
    assert "\n" not in note
    assert texts_in(user_content(upstream.requests[0].body)).startswith("see the plan")


async def test_a_video_is_a_line_not_silence(
    make_config: MakeConfig, upstream: FakeUpstream, api: WhatsAppAPI
) -> None:
    upstream.script(text("Got the words."))
    async for served in serve(make_config, upstream, api):
        await api.user_sends(served.url, OWNER, "video", b"\0\0\0 ftypmp42", "video/mp4")
        await api.wait_until(lambda: "Got the words." in api.texts_to(OWNER))
        await served.chat.idle()
    [media_id] = list(api.media)
    assert api.texts_to(OWNER)[0] == (
        f"video_{media_id}.mp4: can't read this kind of file (video/mp4)"
    )


async def test_a_medium_over_the_cap_or_off_meta_hosts_is_not_fetched(
    make_config: MakeConfig, upstream: FakeUpstream, api: WhatsAppAPI
) -> None:
    upstream.script(text("One."), text("Two."))
    sections = {"attachments": {"max_bytes": 2048}}
    async for served in serve(make_config, upstream, api, **sections):
        await api.user_sends(served.url, OWNER, "image", bytes(5000), "image/jpeg")
        await api.wait_until(lambda: "One." in api.texts_to(OWNER))
        await served.chat.idle()
        api.media_host = "localhost"  # the same stand-in, but not the host of base_url
        await api.user_sends(served.url, OWNER, "document", b"hi", "text/plain", filename="a.txt")
        await api.wait_until(lambda: "Two." in api.texts_to(OWNER))
        await served.chat.idle()
    too_large, one, foreign, two = api.texts_to(OWNER)
    assert too_large.endswith("could not be downloaded: larger than 2048 bytes")
    assert (
        foreign == "a.txt: could not be downloaded: whatsapp: the media has no URL on Meta's hosts"
    )
    assert (one, two) == ("One.", "Two.")
    assert api.media_fetches == []  # neither was asked for: the token went nowhere


async def test_the_stand_in_serves_media_only_with_the_bearer(api: WhatsAppAPI) -> None:
    media_id = api.upload(b"bytes", "image/png")
    bearer = {"Authorization": f"Bearer {api.token}"}
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{api.base_url}/{media_id}")).status_code == 401
        info = (await client.get(f"{api.base_url}/{media_id}", headers=bearer)).json()
        assert (info["mime_type"], info["file_size"]) == ("image/png", 5)
        assert (await client.get(info["url"])).status_code == 401
        assert (await client.get(info["url"], headers=bearer)).content == b"bytes"

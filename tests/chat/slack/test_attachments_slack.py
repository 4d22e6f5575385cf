"""Slack attachments end to end: a ``file_share`` message's files read through ``files.info``
and ``url_private`` with the bot token, by the real slack-sdk adapter against ``SlackAPI``."""

from __future__ import annotations

from typing import Any

import pytest

from iris.config import Config
from tests.chat.attachments import images_in, photo, texts_in, user_content
from tests.chat.harness import platform_config, running
from tests.conftest import MakeConfig
from tests.fakes.slack_api import SlackAPI, message_event
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(20)

OWNER = "U0000042"


def config(
    make_config: MakeConfig, upstream: FakeUpstream, api: SlackAPI, **sections: Any
) -> Config:
    settings = {
        "bot_token": api.bot_token,
        "app_token": api.app_token,
        "base_url": api.base_url,
        "allowed_users": [OWNER],
        "groups": {"respond": "all"},  # a channel message: no mention needed here,
    }
    edits = {"platforms": {"slack": {"transport": "edit"}}}
    return platform_config(make_config, upstream, "slack", settings, display=edits, **sections)


def texts(api: SlackAPI) -> list[str]:
    return [m.text for m in api.messages.values()]


async def test_shared_files_are_read_with_the_bot_token(
    make_config: MakeConfig, upstream: FakeUpstream, api: SlackAPI
) -> None:
    upstream.script(text("Both seen."))
    built = config(
        make_config, upstream, api, model={"vision": True}, attachments={"max_edge": 100}
    )
    files = [
        api.share_file("chart.jpg", "image/jpeg", photo(300, 150)),
        api.share_file("data.csv", "text/csv", b"a,b\n1,2\n"),
    ]
    event = message_event(OWNER, "compare", subtype="file_share", files=files)
    async with running(built) as surface:
        await api.push_event(event)
        await api.wait_until(lambda: texts(api) == ["Both seen."])
        await surface.idle()
    assert [c.args["file"] for c in api.calls_to("files.info")] == ["F0000001", "F0000002"]
    assert [auth for _, auth in api.file_fetches] == [f"Bearer {api.bot_token}"] * 2
    content = user_content(upstream.requests[0].body)
    (image,) = images_in(content)
    assert image.size == (100, 50)
    assert texts_in(content) == 'compare\n<file name="data.csv">\na,b\n1,2\n\n</file>'


async def test_a_file_slack_will_not_give_is_a_line_and_the_text_goes_through(
    make_config: MakeConfig, upstream: FakeUpstream, api: SlackAPI
) -> None:
    upstream.script(text("Text only."))
    files = [api.share_file("gone.txt", "text/plain", b"x"), {"id": "F9999999", "name": "x.txt"}]
    event = message_event(OWNER, "here", subtype="file_share", files=files)
    api.file_bytes.clear()  # deleted after it was shared
    async with running(config(make_config, upstream, api)) as surface:
        await api.push_event(event)
        await api.wait_until(lambda: "Text only." in texts(api))
        await surface.idle()
    assert texts(api)[0] == (
        "gone.txt: could not be downloaded: slack: the file answered 404\n"
        "x.txt: could not be downloaded: slack: file_not_found"
    )
    assert texts_in(user_content(upstream.requests[0].body)).startswith("here")

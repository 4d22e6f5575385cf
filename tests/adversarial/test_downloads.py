"""Finding 8 of the third hardening pass: a Telegram download was read whole before its size
was checked (``download_as_bytearray``): a lying ``getFile`` and a 1.5 GB body took Iris to
5.8 GB. It now goes through the capped reader WhatsApp and Slack use, which stops reading past
``attachments.max_bytes``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.chat.attachments import texts_in, user_content
from tests.chat.harness import running
from tests.chat.telegram.harness import CHAT, OWNER, config
from tests.conftest import MakeConfig
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, text

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]

CAP = 1_000_000
BODY = 256 * 1024 * 1024  # what the file URL would stream; getFile says 1 000 bytes


@pytest.fixture
async def api() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi() as fake:
        yield fake


async def test_a_file_bigger_than_getfile_said_is_cut_off_at_the_cap(
    make_config: MakeConfig, upstream: FakeUpstream, api: FakeBotApi
) -> None:
    upstream.script(text("Answered the text."))
    async with running(config(make_config, upstream, api, max_bytes=CAP)) as surface:
        api.bottomless["documents/file_1"] = BODY
        api.user_sends_file(
            CHAT, OWNER, "document", b"", name="a.txt", caption="read it", file_size=1000
        )
        await api.wait_until(lambda: len(api.chat(CHAT)) == 2)
        await surface.idle()
    note, answer = api.chat(CHAT)
    assert note.startswith("a.txt: could not be downloaded: ") and "larger than" in note
    assert answer == "Answered the text."
    assert texts_in(user_content(upstream.requests[0].body)).startswith("read it")
    # Read no further than the cap and what the sockets buffer: never the whole body.
    assert api.streamed["documents/file_1"] < CAP + 16 * 1024 * 1024, api.streamed

"""WhatsApp end to end: Meta's webhook into ``iris serve``'s app on uvicorn, the real agent
streaming from a scripted upstream, replies through the Cloud API stand-in.

A user's message arrives as a signed webhook POST; the reply must arrive as a few paragraph
blocks that read back as the answer, within the pair rate limit; a forged or unsigned POST, a
stranger and a redelivery start no turn; commands work; a closed 24-hour window is said once.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from iris.surfaces.chat.platforms.whatsapp import WEBHOOK_PATH
from iris.surfaces.chat.reply import INTERRUPTED
from tests.chat.whatsapp.harness import OWNER, STRANGER, VERIFY, Served, serve
from tests.conftest import MakeConfig
from tests.fakes.served import Served as IrisServe
from tests.fakes.served import free_port, write_config
from tests.fakes.upstream import FakeUpstream, text
from tests.fakes.whatsapp_api import WhatsAppAPI

pytestmark = pytest.mark.timeout(30)


def paragraphs(n: int, words: int = 10) -> list[str]:
    """A reply of ``n`` paragraphs as a model streams it: a word at a time."""
    chunks: list[str] = []
    for i in range(n):
        chunks += [f"p{i}w{j} " for j in range(words - 1)]
        chunks.append(f"p{i}end.\n\n" if i < n - 1 else f"p{i}end.")
    return chunks


# A reply whose first paragraph (25 words, past min_block_chars below) is a block of its own;
# the stream stops at GATE, two words into the second paragraph, until released.
LONG_FIRST = paragraphs(3, words=25)
GATE = 27


@pytest.fixture
async def api() -> AsyncIterator[WhatsAppAPI]:
    # The stand-in's pair limit is a little stricter than the budget Iris is given below, as
    # Meta's is a little stricter than the figures Iris's defaults are given.
    async with WhatsAppAPI(pair_every=0.25) as fake:
        yield fake


@pytest.fixture
async def served(
    make_config: MakeConfig, upstream: FakeUpstream, api: WhatsAppAPI
) -> AsyncIterator[Served]:
    async for running in serve(make_config, upstream, api):
        yield running


async def test_a_reply_arrives_as_paragraph_blocks_that_read_back_as_the_answer(
    served: Served, api: WhatsAppAPI, upstream: FakeUpstream
) -> None:
    chunks = paragraphs(6)
    answer = "".join(chunks)
    upstream.script(text(*chunks, delay=0.02))
    status, wamid = await api.user_says(served.url, OWNER, "tell me a story")
    assert status == 200
    await api.wait_until(lambda: "".join(api.texts_to(OWNER)).strip() == answer)
    await served.chat.idle()

    blocks = api.texts_to(OWNER)
    assert 2 <= len(blocks) < 6, blocks  # paragraph-sized: never one message per delta
    assert all(b.endswith("\n\n") for b in blocks[:-1]), "each block ends a paragraph"
    assert api.pair_limited == 0
    # Read and "typing…" while the turn ran, on the user's message.
    assert api.reads and all(r["message_id"] == wamid for r in api.reads)
    assert all(r["typing_indicator"] == {"type": "text"} for r in api.reads)
    assert upstream.requests[0].body["messages"][-1]["content"] == "tell me a story"


async def test_a_forty_block_reply_never_exceeds_the_pair_limit(
    served: Served, api: WhatsAppAPI, upstream: FakeUpstream
) -> None:
    chunks = paragraphs(40, words=4)
    answer = "".join(chunks)
    upstream.script(text(*chunks, delay=0.015))  # ~2.4 s, forty paragraphs of ~30 characters
    await api.user_says(served.url, OWNER, "a long one")
    await api.wait_until(lambda: "".join(api.texts_to(OWNER)).strip() == answer, within=20)
    await served.chat.idle()

    assert api.pair_limited == 0
    assert len(api.texts_to(OWNER)) < 15, "blocks waiting for the pair budget merged"
    times = [s.t for s in api.sent]
    assert all(b - a >= 0.25 for a, b in zip(times, times[1:], strict=False))


async def test_a_forged_or_missing_signature_is_401_and_starts_no_turn(
    served: Served, api: WhatsAppAPI, upstream: FakeUpstream
) -> None:
    event = api.event(OWNER, "run rm -rf /", "wamid.forged.1")
    forged = "sha256=" + "0" * 64
    assert await api.deliver(served.url, event, signature=forged) == 401
    assert await api.deliver(served.url, event, signed=False) == 401
    other = WhatsAppAPI(app_secret="not-the-app-secret")
    assert await api.deliver(served.url, event, signature=other.signature(b"{}")) == 401
    await served.chat.idle()
    assert upstream.requests == []
    assert api.calls == []
    # The same event, signed with the app secret, is taken: the refusals were the signature.
    upstream.script(text("ok"))
    assert await api.deliver(served.url, event) == 200
    await api.wait_until(lambda: api.texts_to(OWNER) == ["ok"])


async def test_meta_verification_answers_the_challenge_only_for_the_verify_token(
    served: Served,
) -> None:
    async with httpx.AsyncClient() as client:
        params = {
            "hub.mode": "subscribe",
            "hub.verify_token": VERIFY,
            "hub.challenge": "1158201444",
        }
        ok = await client.get(served.url, params=params)
        wrong = await client.get(served.url, params={**params, "hub.verify_token": "guess"})
    assert (ok.status_code, ok.text) == (200, "1158201444")
    assert wrong.status_code == 403


async def test_a_user_not_allowed_starts_no_turn(
    served: Served, api: WhatsAppAPI, upstream: FakeUpstream
) -> None:
    # A profile name is the user's to choose: even the owner's number as a name is no pass.
    event = api.event(STRANGER, "hello", "wamid.stranger.1", name=OWNER)
    assert await api.deliver(served.url, event) == 200
    await api.wait_until(lambda: api.texts_to(STRANGER))
    await served.chat.idle()
    assert upstream.requests == []
    assert "private" in api.texts_to(STRANGER)[0]


async def test_a_redelivered_webhook_runs_one_turn(
    served: Served, api: WhatsAppAPI, upstream: FakeUpstream
) -> None:
    upstream.script(text("only once"))
    event = api.event(OWNER, "hi", "wamid.retried.1")
    assert await api.deliver(served.url, event) == 200
    assert await api.deliver(served.url, event) == 200  # Meta retries a slow answer
    await api.wait_until(lambda: api.texts_to(OWNER) == ["only once"])
    await served.chat.idle()
    assert len(upstream.requests) == 1
    upstream.assert_used_up()


async def test_new_and_stop_work(served: Served, api: WhatsAppAPI, upstream: FakeUpstream) -> None:
    upstream.script(text(*LONG_FIRST, gate_after=GATE))
    await api.user_says(served.url, OWNER, "start something long")
    # The first paragraph's block: Iris holds the text up to the gate ("typing…" alone would
    # not say so: it starts before the model is even asked).
    await api.wait_until(lambda: api.texts_to(OWNER))
    await api.user_says(served.url, OWNER, "/stop")
    await api.wait_until(lambda: "stopped" in api.texts_to(OWNER))
    await api.wait_until(lambda: any(r.endswith(INTERRUPTED) for r in api.texts_to(OWNER)))
    await served.chat.idle()
    replies = api.texts_to(OWNER)
    [cut] = [r for r in replies if r.endswith(INTERRUPTED)]
    assert cut.startswith("p1w0") and "p2end" not in "".join(replies)
    await api.user_says(served.url, OWNER, "/new")
    await api.wait_until(lambda: any(r.startswith("new conversation") for r in api.texts_to(OWNER)))
    assert len(upstream.requests) == 1, "commands never reach the model"


async def test_a_closed_24_hour_window_is_logged_once_and_not_retried(
    served: Served, api: WhatsAppAPI, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    api.closed.add(OWNER)
    upstream.script(text(*paragraphs(4), delay=0.02))
    with caplog.at_level(logging.WARNING):
        await api.user_says(served.url, OWNER, "hello again")
        await api.wait_until(lambda: api.errors(131047))
        await served.chat.idle()
    assert len(api.errors(131047)) == 1, "the rest of the reply was not tried"
    assert api.texts_to(OWNER) == []
    lines = [r.getMessage() for r in caplog.records if "24 hours" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "template" in lines[0]


async def test_a_transient_error_is_retried_and_the_block_lands_once(
    served: Served, api: WhatsAppAPI, upstream: FakeUpstream
) -> None:
    api.script(131000)  # Meta: "Something went wrong"
    upstream.script(text("Hello there."))
    await api.user_says(served.url, OWNER, "hi")
    await api.wait_until(lambda: api.texts_to(OWNER) == ["Hello there."])
    await served.chat.idle()
    assert len(api.errors(131000)) == 1


async def test_iris_serve_takes_only_signed_webhooks_and_replies(
    tmp_path: Path, api: WhatsAppAPI, upstream: FakeUpstream
) -> None:
    """The same through ``iris serve`` itself, a process of its own, as a user runs it."""
    whatsapp = {
        "enabled": True,
        "base_url": api.base_url,
        "phone_number_id": api.phone_number_id,
        "access_token": api.token,
        "app_secret_env": "IRIS_TEST_WHATSAPP_APP_SECRET",
        "verify_token": VERIFY,
        "allowed_users": [OWNER],
    }
    environ = {**os.environ, "IRIS_TEST_WHATSAPP_APP_SECRET": api.app_secret}
    port = free_port()
    config = write_config(
        tmp_path,
        upstream.base_url,
        port,
        platforms={"iris": {"enabled": False}, "whatsapp": whatsapp},
        streaming={"enabled": True},
    )
    server = IrisServe(config, env=environ)
    try:
        # Its start checks the token against the stand-in, served by this loop: wait aside.
        await asyncio.to_thread(server.wait_for, "Application startup complete")
        url = f"http://127.0.0.1:{port}{WEBHOOK_PATH}"
        event = api.event(OWNER, "hello", "wamid.served.1")
        assert await api.deliver(url, event, signed=False) == 401
        async with httpx.AsyncClient() as client:
            params = {"hub.mode": "subscribe", "hub.verify_token": VERIFY, "hub.challenge": "42"}
            assert (await client.get(url, params=params)).text == "42"
        upstream.script(text("Hello ", "from ", "iris serve."))
        assert await api.deliver(url, event) == 200
        await api.wait_until(lambda: api.texts_to(OWNER) == ["Hello from iris serve."])
        assert len(upstream.requests) == 1
    finally:
        server.stop()


async def test_the_rest_of_a_reply_a_new_message_cut_quotes_its_question(
    served: Served, api: WhatsAppAPI, upstream: FakeUpstream
) -> None:
    upstream.script(text(*LONG_FIRST, gate_after=GATE), text("Second answer."))
    _, first = await api.user_says(served.url, OWNER, "first question")
    await api.wait_until(lambda: api.texts_to(OWNER))  # Iris holds the text up to the gate
    _, second = await api.user_says(served.url, OWNER, "never mind, second question")
    await api.wait_until(lambda: "Second answer." in api.texts_to(OWNER))
    await served.chat.idle()
    [cut] = [s for s in api.sent if s.text.endswith(INTERRUPTED)]
    assert cut.quoted == first, "what the cut reply answered"
    [answer] = [s for s in api.sent if s.text == "Second answer."]
    assert answer.quoted == "", "the newest question's answer follows it: no quote"
    assert second != first

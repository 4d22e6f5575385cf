"""Matrix end to end against a real Synapse: a direct room, streamed by edits.

The agent streams from ``FakeUpstream``; the bot is ``MatrixPlatform`` on a Synapse the
session started; the person is another account whose own ``/sync`` shows what reached them.
"""

from __future__ import annotations

import asyncio

import pytest

from iris.surfaces.chat.platforms import matrix_events as events
from iris.surfaces.chat.platforms.matrix import MAX_TEXT
from iris.surfaces.chat.reply import CURSOR
from tests.chat.matrix.harness import gateway, joined, matrix_config, messages
from tests.chat.matrix.synapse import Person, Synapse, shown
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, gated, text

pytestmark = pytest.mark.timeout(150)

CHUNKS = [f"**word{i}** <b>x</b> " for i in range(30)]
REPLY = "".join(CHUNKS).strip()


async def test_a_direct_room_streams_by_edits_visible_before_the_model_finished(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
) -> None:
    room = await alice.room(bot[0], direct=True)  # invited before the bot starts: auto_join
    config = matrix_config(make_config, upstream, synapse, bot, [alice.user_id])
    async with gateway(config):
        await joined(alice, room, bot[0])
        upstream.script(gated(*CHUNKS, after=10))
        await alice.say(room, "tell me something")
        # The model is held after ten chunks: what the person sees came before it finished.
        await alice.wait_until(lambda: shown(messages(alice, room, bot[0])))
        assert upstream.gate_reached.is_set() and not upstream.finished.is_set()
        first = shown(messages(alice, room, bot[0]))[0]
        assert first.endswith(CURSOR) and REPLY.startswith(first.removesuffix(CURSOR).strip())
        upstream.release()
        await alice.wait_until(lambda: shown(messages(alice, room, bot[0])) == [REPLY])

    sent = messages(alice, room, bot[0])
    edits = [e for e in sent if e["content"].get("m.relates_to", {}).get("rel_type") == "m.replace"]
    assert len(sent) - len(edits) == 1 and edits, "one message, grown by edits"
    assert all(e["content"]["m.relates_to"]["event_id"] == sent[0]["event_id"] for e in edits)
    final = edits[-1]["content"]["m.new_content"]
    assert final["body"] == REPLY
    # Markdown as HTML beside the plain body; the model's own HTML only as text.
    assert final["format"] == events.HTML
    assert "<strong>word0</strong>" in final["formatted_body"]
    assert "<b>" not in final["formatted_body"] and "&lt;b&gt;" in final["formatted_body"]
    assert upstream.requests[0].body["messages"][-1]["content"] == "tell me something"


async def test_a_reply_longer_than_one_event_continues_in_a_new_message(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
) -> None:
    words = [f"w{i:05d} " for i in range(MAX_TEXT // 4)]  # ~1.5 messages
    reply = "".join(words).strip()
    room = await alice.room(bot[0], direct=True)
    config = matrix_config(make_config, upstream, synapse, bot, [alice.user_id])
    async with gateway(config):
        await joined(alice, room, bot[0])
        upstream.script(text(*words))
        await alice.say(room, "long please")
        await alice.wait_until(
            lambda: (
                (s := shown(messages(alice, room, bot[0])))
                and len(s) == 2
                and not s[-1].endswith(CURSOR)
            )
        )
    parts = shown(messages(alice, room, bot[0]))
    assert all(len(p) <= MAX_TEXT for p in parts)
    assert " ".join(parts).split() == reply.split()


async def test_a_restart_does_not_answer_again_and_its_own_events_are_not_read(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
) -> None:
    room = await alice.room(bot[0], direct=True)
    config = matrix_config(make_config, upstream, synapse, bot, [alice.user_id])
    upstream.script(text("first answer"))
    async with gateway(config) as (surface, _):
        await joined(alice, room, bot[0])
        await alice.say(room, "one")
        await alice.wait_until(lambda: shown(messages(alice, room, bot[0])) == ["first answer"])
        await surface.idle()
    upstream.script(text("second answer"))
    async with gateway(config) as (surface, _):  # the same store: its sync token is kept
        await alice.say(room, "two")
        await alice.wait_until(
            lambda: shown(messages(alice, room, bot[0])) == ["first answer", "second answer"]
        )
        await surface.idle()
    asked = [r.body["messages"][-1]["content"] for r in upstream.requests]
    assert asked == ["one", "two"], "nothing was answered twice, nothing of the bot's own read"
    assert not upstream.unexpected


async def test_a_refused_token_is_one_line_and_the_gateway_stays_up(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = matrix_config(make_config, upstream, synapse, (bot[0], "syt_wrong"), [])
    from tests.chat.harness import running

    async with running(config) as surface:
        assert surface.platforms and not surface._connected  # pyright: ignore[reportPrivateUsage]
    refused = [r.getMessage() for r in caplog.records if "refused the login" in r.getMessage()]
    assert refused == [
        "chat platform matrix not started: matrix: the homeserver refused the login: "
        "matrix: M_UNKNOWN_TOKEN: Invalid access token passed."
    ]


async def test_a_fresh_final_is_a_new_message_and_the_preview_is_redacted(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
) -> None:
    room = await alice.room(bot[0], direct=True)
    display = {"platforms": {"matrix": {"transport": "edit", "fresh_final_after": 0.1}}}
    config = matrix_config(make_config, upstream, synapse, bot, [alice.user_id], display=display)
    upstream.script(gated(*CHUNKS, after=10))
    async with gateway(config) as (surface, _):
        await joined(alice, room, bot[0])
        await alice.say(room, "notify me")
        await alice.wait_until(lambda: shown(messages(alice, room, bot[0])))
        # A fresh final is for an answer that ends when its preview is older than
        # fresh_final_after: on a quiet machine the rest of the stream could end sooner.
        await asyncio.sleep(0.3)
        upstream.release()
        await alice.wait_until(
            lambda: any(e.get("type") == "m.room.redaction" for e in alice.from_user(bot[0], room))
        )
        await surface.idle()
    sent = messages(alice, room, bot[0])
    news = [e for e in sent if "m.new_content" not in e["content"]]
    assert len(news) == 2 and news[-1]["content"]["body"] == REPLY, "the answer came anew"
    (redaction,) = [e for e in alice.from_user(bot[0], room) if e["type"] == "m.room.redaction"]
    assert redaction.get("redacts", redaction["content"].get("redacts")) == news[0]["event_id"]

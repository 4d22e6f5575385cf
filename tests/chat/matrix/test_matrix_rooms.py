"""Matrix group rooms, threads, commands and Synapse's rate limit, against a real Synapse."""

from __future__ import annotations

import asyncio
import logging

import pytest

from iris.surfaces.chat.platforms import matrix_events as events
from iris.surfaces.chat.reply import CURSOR
from tests.chat.matrix.harness import gateway, joined, matrix_config, messages
from tests.chat.matrix.synapse import Person, Synapse, shown
from tests.conftest import MakeConfig
from tests.fakes.scenarios import Received
from tests.fakes.upstream import FakeUpstream, gated, hold, responder, text

pytestmark = pytest.mark.timeout(150)


def asked(upstream: FakeUpstream) -> list[str]:
    return [r.body["messages"][-1]["content"] for r in upstream.requests]


async def group(alice: Person, bob: Person, bot: str) -> str:
    """A room of three: alice (who made it), bob and the bot."""
    room = await alice.room(bot, bob.user_id)
    await bob.join(room)
    await joined(alice, room, bob.user_id)
    return room


async def test_a_group_room_answers_only_what_addresses_the_bot(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
    bob: Person,
) -> None:
    room = await group(alice, bob, bot[0])
    config = matrix_config(make_config, upstream, synapse, bot, [alice.user_id])
    upstream.script(text("Four."), text("Five."), text("Six."))
    async with gateway(config) as (surface, _):
        await joined(alice, room, bot[0])
        await alice.say(room, "hello everyone")  # chatter: not for the bot
        pill = f'<a href="https://matrix.to/#/{bot[0]}">Iris</a>: what is 2+2'
        await alice.say(
            room,
            "Iris: what is 2+2",
            format=events.HTML,
            formatted_body=pill,
            **{"m.mentions": {"user_ids": [bot[0]]}},
        )
        await alice.wait_until(lambda: shown(messages(alice, room, bot[0])) == ["Four."])
        answer = messages(alice, room, bot[0])[0]["event_id"]
        await alice.say(
            room, "and plus one?", **{"m.relates_to": {"m.in_reply_to": {"event_id": answer}}}
        )
        await alice.wait_until(lambda: len(shown(messages(alice, room, bot[0]))) == 2)
        await alice.say(room, f"{bot[0]} and plus two?")  # the bare user id in the text
        await alice.wait_until(lambda: len(shown(messages(alice, room, bot[0]))) == 3)
        await surface.idle()
    assert asked(upstream) == ["what is 2+2", "and plus one?", "and plus two?"]
    assert shown(messages(alice, room, bot[0])) == ["Four.", "Five.", "Six."]


def _answer(request: Received) -> object:
    question = request.body["messages"][-1]["content"]
    return gated("Answer ", f"to {question}", after=1)


async def test_two_threads_are_answered_at_once_each_in_its_own_thread(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
    bob: Person,
) -> None:
    room = await group(alice, bob, bot[0])
    config = matrix_config(make_config, upstream, synapse, bot, [alice.user_id])
    upstream.default = responder(_answer)  # pyright: ignore[reportArgumentType]
    async with gateway(config) as (surface, _):
        await joined(alice, room, bot[0])
        roots = [await alice.say(room, f"topic {n}") for n in (1, 2)]
        for n, root in enumerate(roots, 1):
            thread = {"rel_type": "m.thread", "event_id": root}
            await alice.say(
                room,
                f"question {n}",
                **{"m.relates_to": thread, "m.mentions": {"user_ids": [bot[0]]}},
            )
        # Both turns are streaming at once: each request came before either was let go.
        await asyncio.to_thread(upstream.wait_for_request, 2, 20.0)
        upstream.release()
        await alice.wait_until(lambda: len(_final(alice, room, bot[0])) == 2)
        # A follow-up in a thread the bot answered in needs no mention.
        thread = {"rel_type": "m.thread", "event_id": roots[0]}
        await alice.say(room, "and more", **{"m.relates_to": thread})
        await alice.wait_until(lambda: len(_final(alice, room, bot[0])) == 3)
        await surface.idle()

    by_thread: dict[str, list[str]] = {}
    for event in messages(alice, room, bot[0]):
        relates = event["content"].get("m.relates_to", {})
        if relates.get("rel_type") == "m.thread":
            by_thread.setdefault(relates["event_id"], []).append(event["content"]["body"])
    finals = {
        root: [t for t in texts if not t.endswith(CURSOR)] for root, texts in by_thread.items()
    }
    assert set(finals) == set(roots), "every new message went into its thread"
    # One session per thread: the second thread's request holds nothing of the first's.
    requests = {r.body["messages"][-1]["content"]: r.body["messages"] for r in upstream.requests}
    assert "question 1" not in str(requests["question 2"])
    assert "question 1" in str(requests["and more"])


def _final(person: Person, room: str, bot: str) -> list[str]:
    return [
        t
        for t in shown(messages(person, room, bot))
        if t.startswith("Answer") and not t.endswith(CURSOR)
    ]


async def test_stop_interrupts_the_reply(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
) -> None:
    room = await alice.room(bot[0], direct=True)
    config = matrix_config(make_config, upstream, synapse, bot, [alice.user_id])
    upstream.script(hold("Working ", "on ", "it, ", "slowly. ", "More ", "to ", "come "))
    async with gateway(config) as (surface, _):
        await joined(alice, room, bot[0])
        await alice.say(room, "go")
        await alice.wait_until(lambda: shown(messages(alice, room, bot[0])))
        await alice.say(room, "/stop")
        await asyncio.to_thread(upstream.disconnected.wait, 20.0)
        assert upstream.disconnected.is_set(), "the model's stream was cut"
        await alice.wait_until(
            lambda: (
                (s := shown(messages(alice, room, bot[0])))
                and s[0] == "Working on it, slowly. More to come"
                and len(s) == 2
            )
        )
        await surface.idle()
    texts = shown(messages(alice, room, bot[0]))
    assert "stop" in texts[1].lower()
    assert asked(upstream) == ["go"], "/stop never reached the model"


async def test_m_limit_exceeded_is_honoured_counted_and_the_reply_still_exact(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "iris.surfaces.chat.consumer")
    _, admin = synapse.register("admin", admin=True)
    synapse.limit(admin, bot[0], per_second=1, burst=2)  # tight rc_message, this bot only
    room = await alice.room(bot[0], direct=True)
    chunks = [f"piece{i} " for i in range(40)]
    config = matrix_config(
        make_config,
        upstream,
        synapse,
        bot,
        [alice.user_id],
        matrix={"budgets": {"bot": {"calls": 20, "per": 1.0}, "room": {"calls": 10, "per": 1.0}}},
        display={"platforms": {"matrix": {"transport": "edit", "edit_interval": 0.1}}},
    )
    upstream.script(text(*chunks, delay=0.05))
    async with gateway(config) as (surface, platform):
        await joined(alice, room, bot[0])
        await alice.say(room, "go")
        reply = "".join(chunks).strip()
        await alice.wait_until(lambda: shown(messages(alice, room, bot[0])) == [reply], 60)
        await surface.idle()
        limited = platform.api.limited
    assert limited >= 1, "Synapse's limit was met"
    assert f"rate limited in {room}: retry after" in caplog.text
    bodies = [e["content"]["body"] for e in messages(alice, room, bot[0])]
    assert bodies[0].startswith("piece0"), "one message, never sent twice"
    assert sum(1 for e in messages(alice, room, bot[0]) if "m.new_content" not in e["content"]) == 1

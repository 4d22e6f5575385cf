"""Matrix approvals by reaction, files from the media repository, encrypted rooms: real Synapse.

Approvals: Matrix has no buttons, so the prompt is a message the bot reacts to with ✅ 🔁 ❌;
only an allowed person's reaction on that very event answers it, and the prompt is edited to
say what was decided and by whom.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from iris.surfaces.chat.platforms.matrix import ENCRYPTED
from tests.chat.attachments import images_in, photo, texts_in, user_content
from tests.chat.matrix.harness import gateway, joined, matrix_config, messages
from tests.chat.matrix.synapse import Person, Synapse, shown
from tests.conftest import MakeConfig, shared_workspace
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(150)

COMMAND = "echo ran >> approved; echo done-running"


def approvals_config(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    allowed: list[str],
    tmp_path: Path,
) -> Any:
    tools = {
        "enabled": ["terminal"],
        "terminal": shared_workspace(tmp_path),
        "approval": {"mode": "ask", "timeout": 60},
    }
    matrix = {"groups": {"respond": "all"}, "debounce": 0}
    return matrix_config(make_config, upstream, synapse, bot, allowed, matrix=matrix, tools=tools)


def ran(tmp_path: Path) -> int:
    marker = tmp_path / "ws" / "approved"
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def prompt_of(person: Person, room: str, bot: str) -> dict[str, Any] | None:
    return next(
        (e for e in messages(person, room, bot) if e["content"]["body"].startswith("⚠️ Approve")),
        None,
    )


def reactions(person: Person, room: str, bot: str, event_id: str) -> list[str]:
    return [
        e["content"]["m.relates_to"]["key"]
        for e in person.from_user(bot, room)
        if e.get("type") == "m.reaction" and e["content"]["m.relates_to"]["event_id"] == event_id
    ]


@pytest.mark.parametrize(
    ("key", "outcome", "runs"), [("✅", "✅ Allowed once by", 1), ("❌", "❌ Denied by", 0)]
)
async def test_only_an_allowed_persons_reaction_on_the_prompt_answers_it(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
    bob: Person,
    tmp_path: Path,
    key: str,
    outcome: str,
    runs: int,
) -> None:
    room = await alice.room(bot[0], bob.user_id)
    await bob.join(room)
    config = approvals_config(make_config, upstream, synapse, bot, [alice.user_id], tmp_path)
    upstream.script(tool_call("terminal", [json.dumps({"command": COMMAND})]), text("Finished."))
    async with gateway(config) as (surface, _):
        await joined(alice, room, bot[0])
        asked = await alice.say(room, "run it")
        await alice.wait_until(lambda: prompt_of(alice, room, bot[0]) is not None)
        prompt = prompt_of(alice, room, bot[0])
        assert prompt is not None
        await alice.wait_until(lambda: len(reactions(alice, room, bot[0], prompt["event_id"])) == 3)
        assert reactions(alice, room, bot[0], prompt["event_id"]) == ["✅", "🔁", "❌"]
        # Not allowed, then on another event: neither decides (the first to count would).
        await bob.react(room, prompt["event_id"], "✅")
        await alice.react(room, asked, "✅")
        await alice.react(room, prompt["event_id"], key)
        await alice.wait_until(
            lambda: (
                "Finished." in (texts := shown(messages(alice, room, bot[0])))
                and any(t.startswith(outcome) for t in texts)
            )
        )
        await surface.idle()
    closed = next(t for t in shown(messages(alice, room, bot[0])) if t.startswith(outcome))
    assert closed.startswith(f"{outcome} {alice.user_id}") and COMMAND in closed, closed
    assert not any(t.startswith("⚠️ Approve") for t in shown(messages(alice, room, bot[0])))
    assert ran(tmp_path) == runs


async def test_an_image_and_a_text_file_reach_the_model(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
) -> None:
    room = await alice.room(bot[0], direct=True)
    config = matrix_config(
        make_config,
        upstream,
        synapse,
        bot,
        [alice.user_id],
        model={"vision": True},
        attachments={"max_edge": 100},
    )
    upstream.script(text("A square."), text("Noted."))
    image = await alice.upload(photo(300, 150), "image/jpeg", "square.jpg")
    notes = await alice.upload(b"line one\n", "text/plain", "notes.txt")
    async with gateway(config) as (surface, _):
        await joined(alice, room, bot[0])
        await alice.api.send_event(
            room, "m.room.message", _file("m.image", "square.jpg", image, "image/jpeg")
        )
        await alice.wait_until(lambda: shown(messages(alice, room, bot[0])) == ["A square."])
        await alice.api.send_event(
            room, "m.room.message", _file("m.file", "notes.txt", notes, "text/plain")
        )
        await alice.wait_until(
            lambda: shown(messages(alice, room, bot[0])) == ["A square.", "Noted."]
        )
        await surface.idle()
    (seen,) = images_in(user_content(upstream.requests[0].body))
    assert seen.size == (100, 50)
    said = texts_in(user_content(upstream.requests[1].body))
    assert '<file name="notes.txt">\nline one\n' in said


def _file(msgtype: str, name: str, url: str, mime: str) -> dict[str, Any]:
    return {"msgtype": msgtype, "body": name, "url": url, "info": {"mimetype": mime}}


async def test_an_encrypted_room_is_told_once_and_never_answered(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
) -> None:
    room = await alice.room(bot[0], direct=True, encrypted=True)
    plain = await alice.room(bot[0], direct=True)  # answered: after it, room was read too
    config = matrix_config(make_config, upstream, synapse, bot, [alice.user_id])
    ciphertext = {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgA", "session_id": "s"}

    async def barrier(n: int) -> None:
        await alice.say(plain, f"ping {n}")
        await alice.wait_until(lambda: f"pong {n}" in shown(messages(alice, plain, bot[0])))

    upstream.script(text("pong 1"), text("pong 2"))
    async with gateway(config) as (surface, _):
        await joined(alice, room, bot[0])
        await joined(alice, plain, bot[0])
        await alice.wait_until(lambda: shown(messages(alice, room, bot[0])) == [ENCRYPTED])
        await alice.api.send_event(room, "m.room.encrypted", ciphertext)
        await alice.say(room, "plain text in an encrypted room")  # a misbehaving client
        await barrier(1)
        await surface.idle()
    async with gateway(config) as (surface, _):  # a restart does not say it again
        await alice.api.send_event(room, "m.room.encrypted", ciphertext)
        await alice.say(room, "again")
        await barrier(2)
        await surface.idle()
    assert shown(messages(alice, room, bot[0])) == [ENCRYPTED]
    assert [r.body["messages"][-1]["content"] for r in upstream.requests] == ["ping 1", "ping 2"]

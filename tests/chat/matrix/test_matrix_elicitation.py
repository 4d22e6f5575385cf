"""An MCP server asks the person for input (elicitation) on Matrix: real Synapse, the fake MCP
server (``tests/fakes/mcp_server.py``, the ``mcp`` SDK's ``ctx.elicit``) as a stdio child.

Matrix's approval reactions offer three answers only, so every field is asked by reply: the
question lists the fields and an enum's choices numbered, the person's next message in the
room answers it, an answer that does not fit is asked again with the reason, and "decline"
ends the request. Each question answered is edited to say what was answered (no reactions).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.chat.approval_chats import tool_result
from tests.chat.matrix.harness import gateway, joined, matrix_config, messages
from tests.chat.matrix.synapse import Person, Synapse, shown
from tests.conftest import MakeConfig
from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(150)


def elicitation_config(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
) -> Any:
    tools = {"enabled": [], "approval": {"mode": "off", "timeout": 60}}
    matrix = {"debounce": 0}
    return matrix_config(
        make_config,
        upstream,
        synapse,
        bot,
        [alice.user_id],
        matrix=matrix,
        tools=tools,
        mcp_servers={"fake": stdio()},
    )


def texts(alice: Person, room: str, bot: tuple[str, str]) -> list[str]:
    return shown(messages(alice, room, bot[0]))


async def test_an_enum_by_number_and_a_wrong_count_asked_again(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
) -> None:
    room = await alice.room(bot[0], direct=True)
    config = elicitation_config(make_config, upstream, synapse, bot, alice)
    upstream.script(tool_call("mcp_fake_paint", ["{}"]), text("Painted."))
    async with gateway(config) as (surface, _):
        await joined(alice, room, bot[0])
        await alice.say(room, "paint it")
        await alice.wait_until(lambda: any("1. red" in t for t in texts(alice, room, bot)))
        [colour] = [t for t in texts(alice, room, bot) if "1. red" in t]
        assert "fake asks: Which colour?" in colour
        assert "Fields: Color *, Coats * (* required); asking 1 of 2." in colour
        assert "Color * (The colour)\n1. red\n2. green\n3. blue" in colour
        assert 'reply "decline" to refuse' in colour
        await alice.say(room, "2")
        await alice.wait_until(lambda: any("Coats *" in t for t in texts(alice, room, bot)))
        # The answered question is edited to say what was picked (the choice's name).
        await alice.wait_until(lambda: any(t.endswith("↪️ green") for t in texts(alice, room, bot)))
        await alice.say(room, "9")
        await alice.wait_until(
            lambda: any(
                "must be at most 5, please answer again" in t for t in texts(alice, room, bot)
            )
        )
        await alice.say(room, "2")
        await alice.wait_until(lambda: "Painted." in texts(alice, room, bot))
        await surface.idle()
    assert tool_result(upstream.requests[1]) == "painted green x2"
    assert len(upstream.requests) == 2, "the replies answered the questions, they ran no turn"
    assert any("✅ Answered by" in t for t in texts(alice, room, bot))
    # Asked by reply: the bot put no approval reactions on its questions.
    assert not [e for e in alice.from_user(bot[0], room) if e.get("type") == "m.reaction"]


@pytest.mark.parametrize(
    ("answer", "result"), [("y", "deleted a.txt"), ("decline", "not deleted (decline)")]
)
async def test_a_yes_or_no_and_the_decline_word(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
    answer: str,
    result: str,
) -> None:
    room = await alice.room(bot[0], direct=True)
    config = elicitation_config(make_config, upstream, synapse, bot, alice)
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Done."))
    async with gateway(config) as (surface, _):
        await joined(alice, room, bot[0])
        await alice.say(room, "delete a.txt")
        await alice.wait_until(lambda: any("Delete a.txt?" in t for t in texts(alice, room, bot)))
        await alice.say(room, answer)
        await alice.wait_until(lambda: "Done." in texts(alice, room, bot))
        await surface.idle()
    assert tool_result(upstream.requests[1]) == result


async def test_in_a_group_room_a_reply_to_the_question_answers_it(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
    bob: Person,
) -> None:
    room = await alice.room(bot[0], bob.user_id)
    await bob.join(room)
    config = elicitation_config(make_config, upstream, synapse, bot, alice)
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Done."))
    async with gateway(config) as (surface, _):
        await joined(alice, room, bot[0])
        await alice.say(room, "delete a.txt", **{"m.mentions": {"user_ids": [bot[0]]}})

        def the_question() -> dict[str, Any] | None:
            return next(
                (
                    e
                    for e in messages(alice, room, bot[0])
                    if "Delete a.txt?" in e["content"]["body"]
                ),
                None,
            )

        await alice.wait_until(lambda: the_question() is not None)
        question = the_question()
        assert question is not None
        await alice.say(room, "no")  # in a group, neither a reply nor a mention: not an answer
        reply = {"m.relates_to": {"m.in_reply_to": {"event_id": question["event_id"]}}}
        await alice.say(room, "yes", **reply)
        await alice.wait_until(lambda: "Done." in texts(alice, room, bot))
        await surface.idle()
    assert tool_result(upstream.requests[1]) == "deleted a.txt"
    assert len(upstream.requests) == 2

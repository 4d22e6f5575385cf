"""Finding 9 of the third hardening pass: one user could take every place in a platform's line
(11 forum topics of one user filled ``queue_size``, and another user was told "Busy"). A user
now holds at most ``max_turns_per_user`` places; the others stay free for everyone else."""

from __future__ import annotations

import asyncio

from iris.surfaces.chat.runner import BUSY
from tests.chat.conftest import Gateway, gateway  # noqa: F401  (fixture)
from tests.chat.messages import message
from tests.conftest import MakeConfig  # noqa: F401
from tests.fakes.upstream import FakeUpstream, hold, text


async def test_one_user_in_many_topics_leaves_room_in_line_for_another(
    gateway: Gateway,  # noqa: F811
    upstream: FakeUpstream,
) -> None:
    upstream.script(hold("Working "), text("A"), text("B"), text("For eight"))
    surface, platform = await gateway(
        allowed=[7, 8],
        server={"max_turns": 1},
        telegram={"queue_size": 8, "max_turns_per_user": 2},
    )
    surface.queued_after = 30.0  # no "queued" note in this test: typing only
    await platform.deliver(message("running", chat="t0"))
    assert await asyncio.to_thread(upstream.gate_reached.wait, 5)
    for n in range(1, 11):  # ten more topics of the same user
        await platform.deliver(message(f"topic {n}", chat=f"t{n}"))
    # Two of them wait (the user's places); the other eight are told busy at once.
    await platform.wait_for(
        lambda: sum(platform.edits_and_sends(f"t{n}") != [] for n in range(1, 11)) == 8
    )
    await platform.deliver(message("me too", user="8", chat="other"))
    await platform.wait_for(lambda: any(c.chat_id == "other" for c in platform.calls))
    upstream.release()
    await platform.wait_for(lambda: "For eight" in platform.chat())
    await surface.idle()
    assert BUSY not in [c.text for c in platform.edits_and_sends("other")]
    asked = [r.body["messages"][-1]["content"] for r in upstream.requests]
    assert asked == ["running", "topic 1", "topic 2", "me too"]
    assert surface.runtime.turns.running == 0

"""A question asked by typed reply, in the shared store (``iris.state.elicitations``), on a
real redis-server: two clients stand for the process asking and the one a webhook reached.

The replies handed over reach the asking process in the order they were given, each once,
however its reads fall between them; a chat names its question only while the request is open,
and the end of an earlier question does not forget a later one asked in the same chat."""

from __future__ import annotations

import asyncio
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iris.state.elicitations import OpenRequest, Reply, SharedElicitations
from iris.state.redis_store import RedisStore
from tests.scale.conftest import RedisServer

CHAT = "whatsapp:15550001111"
FORM = OpenRequest(CHAT, {"type": "object", "properties": {}}, "")

# A plan: texts handed over by the other process (a str), reads by the asking one (None).
plans = st.lists(st.one_of(st.text(min_size=1, max_size=20), st.none()), max_size=30)


async def relayed_in_order(url: str, plan: list[str | None]) -> None:
    prefix = uuid.uuid4().hex  # a fresh store per example
    asking, other = RedisStore(url, prefix=prefix), RedisStore(url, prefix=prefix)
    mine, theirs = SharedElicitations(asking), SharedElicitations(other)
    try:
        await mine.open("elic_1", FORM, 60)
        await mine.asking(CHAT, "elic_1", 60)
        taken: list[Reply] = []
        for step in plan:
            if step is None:
                taken += await mine.replies("elic_1")
                continue
            found = await theirs.asked(CHAT)
            assert found == "elic_1"
            await theirs.relay(found, Reply(step, "Ada"), 60)
        taken += await mine.replies("elic_1")
        assert taken == [Reply(t, "Ada") for t in plan if t is not None]
        assert await mine.replies("elic_1") == []
    finally:
        await asking.aclose()
        await other.aclose()


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plans)
def test_replies_handed_over_reach_the_asking_process_in_order_once_each(
    redis_server: RedisServer, plan: list[str | None]
) -> None:
    asyncio.run(relayed_in_order(redis_server.url, plan))


async def test_a_chat_names_its_question_only_while_the_request_is_open(
    redis_server: RedisServer,
) -> None:
    store = RedisStore(redis_server.url, prefix=uuid.uuid4().hex)
    shared = SharedElicitations(store)
    try:
        assert await shared.asked(CHAT) is None  # no question: a message is a message
        await shared.open("elic_1", FORM, 60)
        await shared.asking(CHAT, "elic_1", 60)
        assert await shared.asked(CHAT) == "elic_1"
        assert 0 < int(await store.aio.ttl(store.chat_key(CHAT, "asking"))) <= 60
        await shared.close("elic_1")  # the request ended before its chat forgot it
        assert await shared.asked(CHAT) is None
        # A later question in the chat outlives the end of the earlier one.
        await shared.open("elic_2", FORM, 60)
        await shared.asking(CHAT, "elic_2", 60)
        await shared.done_asking(CHAT, "elic_1")
        assert await shared.asked(CHAT) == "elic_2"
        await shared.done_asking(CHAT, "elic_2")
        assert await shared.asked(CHAT) is None
    finally:
        await store.aclose()

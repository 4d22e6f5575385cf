"""Finding 11 of the third hardening pass, its Conversations API item: a conversation had no
total size cap (152 MB in 40 appends) and ``GET …/items?limit=1`` loaded all of it. A
conversation now holds at most ``platforms.api_server.max_conversation_bytes`` of items (adding
past it, or a response that would extend it, is a 400 before any work), and a page of items is
read alone — from SQLite and from Redis alike."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from openai import BadRequestError, OpenAI

from iris.state.item_lists import RedisItemLists, SqliteItemLists
from iris.state.redis_store import RedisStore
from iris.state.sqlite import Store
from iris.surfaces.api.items import page
from tests.adversarial.conftest import StartServed
from tests.fakes.upstream import FakeUpstream, text
from tests.scale.conftest import RedisServer, redis_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.timeout(90)

CAP = 200_000


def test_a_conversation_stops_growing_at_its_cap(
    served: StartServed, upstream: FakeUpstream
) -> None:
    _, url = served(
        platforms={"iris": {"enabled": False}, "api_server": {"max_conversation_bytes": CAP}}
    )
    client = OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)
    with client:
        conversation = client.conversations.create()
        chunk = "x" * 9_000
        item = {"type": "message", "role": "user", "content": chunk}
        refused: BadRequestError | None = None
        for _ in range(40):  # 40 appends of ~90 KB: 3.6 MB unbounded
            try:
                client.conversations.items.create(conversation.id, items=[item] * 10)  # pyright: ignore[reportArgumentType]
            except BadRequestError as exc:
                refused = exc
                break
        assert refused is not None and refused.code == "conversation_too_large"
        kept = list(client.conversations.items.list(conversation.id, limit=100))
        assert 0 < sum(len(chunk) for _ in kept) <= CAP
        # A page of one: the newest item, and more behind it.
        newest = client.conversations.items.list(conversation.id, limit=1)
        assert len(newest.data) == 1 and newest.has_more
        assert newest.data[0].id == kept[0].id
        # A turn adds its input and output whatever the size (the model has answered): this
        # one takes it past the cap, and the next is refused before the model is asked.
        upstream.script(text("ok"))
        client.responses.create(
            model="fake-model", input="y" * 20_000, conversation=conversation.id
        )
        with pytest.raises(BadRequestError) as answer:
            client.responses.create(model="fake-model", input="hi", conversation=conversation.id)
        assert answer.value.code == "conversation_too_large"
    assert len(upstream.requests) == 1


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_a_page_is_read_alone_and_matches_the_whole_list(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
    backend: str,
) -> None:
    store = Store(tmp_path / "iris.db")
    shared = RedisStore(redis_server.url) if backend == "redis" else None
    conversations = SqliteItemLists(store) if shared is None else RedisItemLists(shared)
    items = [{"id": f"msg_{n}", "type": "message", "n": n} for n in range(250)]
    await conversations.create({"id": "conv_1", "object": "conversation"}, items[:20])
    for start in range(20, 250, 20):
        await conversations.append("conv_1", items[start : start + 20])

    async def whole(_: str) -> list[dict[str, object]]:
        raise AssertionError("a page read the whole conversation")

    conversations.items = whole  # type: ignore[method-assign]
    try:
        for order in ("asc", "desc"):
            for after in (None, "msg_0", "msg_101", "msg_249", "msg_150"):
                for limit in (1, 20, 100):
                    got = await conversations.page("conv_1", after=after, limit=limit, order=order)
                    query = {
                        "order": order,
                        "limit": str(limit),
                        **({"after": after} if after else {}),
                    }
                    expected = page(items, query)
                    assert got is not None
                    assert got.items == expected["data"], (order, after, limit)
                    assert got.has_more == expected["has_more"], (order, after, limit)
        missing = await conversations.page("conv_1", after="msg_nope", limit=5, order="asc")
        assert missing is not None and not missing.after_found
        assert await conversations.item("conv_1", "msg_201") == items[201]
        size = await conversations.size("conv_1")
        assert size is not None and size > 0
        assert await conversations.delete_item("conv_1", "msg_201")
        smaller = await conversations.size("conv_1")
        assert smaller is not None and smaller < size
    finally:
        if shared is not None:
            await shared.aclose()
        await asyncio.to_thread(store.close)

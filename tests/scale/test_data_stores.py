"""Stored data behaves the same in SQLite and in Redis: every test body here runs against both
backends (``Runtime.create``'s choice), the Redis one on a real redis-server. The session-cut
test (from tests/store/) and the devices' last_seen test (from tests/socket/test_devices.py) moved
here, so one body proves both."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from iris.agent.context import SUMMARY_PREFIX, history
from iris.config import Config
from iris.errors import DeviceError, StoreUnavailable
from iris.runtime import Runtime
from iris.state.devices import TOUCH_EVERY, Devices, RedisDevices, SqliteDevices
from iris.state.responses import Responses
from iris.state.sessions import Sessions
from iris.state.threads import KEPT_S, SqliteThreads
from tests.scale.conftest import RedisServer

pytestmark = pytest.mark.timeout(30)


@dataclass
class Backend:
    name: str
    sessions: Sessions
    responses: Responses
    devices: Devices
    clock: list[float]
    runtime: Runtime


@pytest.fixture(params=["sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    store: dict[str, str] = {"path": str(tmp_path / "iris.db")}
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        store["url"] = server.url
    config = Config.model_validate({"store": store, "model": {"name": "m", "base_url": "http://x"}})
    runtime = Runtime.create(config)
    assert (runtime.shared is not None) == (request.param == "redis")
    # The devices on a clock of the test's, to prove when last_seen is written.
    clock = [1000.0]
    shared = runtime.shared
    devices = (
        SqliteDevices(runtime.store, clock=lambda: clock[0])
        if shared is None
        else RedisDevices(shared, clock=lambda: clock[0])
    )
    assert type(devices) is type(runtime.devices)
    yield Backend(request.param, runtime.sessions, runtime.responses, devices, clock, runtime)
    if runtime.shared is not None:
        runtime.shared.close()
    runtime.store.close()


def say(role: str, text: str) -> dict[str, str]:
    return {"role": role, "content": text}


# -- sessions ----------------------------------------------------------------------------------
async def test_a_summary_cut_heads_the_history_and_keeps_old_messages(backend: Backend) -> None:
    sessions = backend.sessions
    await sessions.append("s", [say("user", "q1"), say("assistant", "a1")])
    await sessions.append("s", [say("user", "q2"), say("assistant", "a2")])
    first = await sessions.transcript("s")
    assert first.messages[0] == say("user", "q1") and first.start == 0
    assert first.positions == [1, 2, 3, 4]
    await sessions.cut("s", "asked q1", after=first.cut_after(2))
    second = await sessions.transcript("s")
    assert second.summary == "asked q1"
    assert second.messages == [say("user", "q2"), say("assistant", "a2")]
    assert history(second) == [
        {"role": "system", "content": SUMMARY_PREFIX + "asked q1"},
        say("user", "q2"),
        say("assistant", "a2"),
    ]
    assert second.start == 2 and second.positions == [3, 4]
    # The model saw the summary's message first: replacing one message replaces only it.
    await sessions.cut("s", "asked q1 and q2", after=second.cut_after(1))
    third = await sessions.transcript("s")
    assert third.summary == "asked q1 and q2"
    assert third.messages == [say("user", "q2"), say("assistant", "a2")]
    await sessions.cut("s")  # /new
    assert await sessions.history("s") == []
    await sessions.append("s", [say("user", "q3")])
    fresh = await sessions.transcript("s")
    assert fresh.messages == [say("user", "q3")] and fresh.positions == [5] and fresh.start == 4
    assert await sessions.last("s") == say("user", "q3")
    assert stored_messages(backend, "s") == 5  # a cut hides messages; the store keeps them


def stored_messages(backend: Backend, session: str) -> int:
    """How many messages of ``session`` the backend holds (hidden by cuts or not)."""
    shared = backend.runtime.shared
    if shared is None:
        rows = backend.runtime.store.query(
            "SELECT COUNT(*) AS n FROM session_messages WHERE session=?", (session,)
        )
        return int(rows[0]["n"])
    return int(shared.sync.llen(shared.tagged_key(f"session:{session}", "messages")))


async def test_a_history_is_its_newest_messages_and_never_starts_with_a_tool_result(
    backend: Backend,
) -> None:
    sessions = backend.sessions
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "out"}
    await sessions.append("s", [say("user", "q"), call, result, say("assistant", "done")])
    assert await sessions.history("s", limit=3) == [call, result, say("assistant", "done")]
    tail = await sessions.transcript("s", limit=2)
    assert tail.messages == [say("assistant", "done")] and tail.positions == [4]
    assert await sessions.history("other") == [] and await sessions.last("other") is None
    await sessions.append("s", [])
    assert len(await sessions.history("s")) == 4


async def test_reset_forgets_a_session_and_only_that_one(backend: Backend) -> None:
    sessions = backend.sessions
    await sessions.append("iris:a", [say("user", "hello a")])
    await sessions.append("iris:b", [say("user", "hello b")])
    await sessions.cut("iris:a", "sum")
    await sessions.reset("iris:a")
    assert (await sessions.transcript("iris:a")).messages == []
    assert await sessions.last("iris:a") is None
    assert [s.session for s in await sessions.summaries("iris:", 10)] == ["iris:b"]
    await sessions.append("iris:a", [say("user", "again")])
    assert (await sessions.transcript("iris:a")).positions == [1]


async def test_summaries_list_a_prefix_newest_first_with_the_first_user_message(
    backend: Backend,
) -> None:
    sessions = backend.sessions
    await sessions.append("iris:one", [say("system", "s"), say("user", "first one")])
    await sessions.append("iris:two", [say("user", "first two")])
    await sessions.append("telegram:9", [say("user", "elsewhere")])
    await sessions.append("iris:three", [say("assistant", "no user yet")])
    await sessions.cut("iris:one")  # a cut keeps the chat's first message its title
    await sessions.append("iris:one", [say("user", "later")])
    found = await sessions.summaries("iris:", 10)
    assert [s.session for s in found] == ["iris:one", "iris:three", "iris:two"]
    assert [s.first_user for s in found] == [
        say("user", "first one"),
        None,
        say("user", "first two"),
    ]
    assert found[0].updated >= found[1].updated >= found[2].updated > 0
    assert [s.session for s in await sessions.summaries("iris:", 2)] == ["iris:one", "iris:three"]
    assert await sessions.summaries("slack:", 10) == []


# -- stored responses --------------------------------------------------------------------------
async def test_a_stored_response_its_conversation_and_its_items(backend: Backend) -> None:
    responses = backend.responses
    message = {"id": "msg_1", "type": "message", "content": [{"type": "output_text", "text": "hi"}]}
    call = {"id": "fc_1", "type": "function_call", "name": "f", "arguments": "{}"}
    response = {"id": "resp_1", "object": "response", "output": [message, call, {"type": "x"}]}
    conversation = [say("user", "hello"), say("assistant", "hi")]
    await responses.save(response, conversation)
    assert await responses.response("resp_1") == response
    assert await responses.history("resp_1") == conversation
    assert await responses.items(["fc_1", "nope", "msg_1", "fc_1"]) == {
        "fc_1": call,
        "msg_1": message,
    }
    assert await responses.items([]) == {}
    for unknown in ("resp_2", "item:fc_1", ""):  # a path a client typed is never a 500
        assert await responses.response(unknown) is None
        assert await responses.history(unknown) is None
    # Saving again (a background response's final state) replaces it.
    done = {**response, "status": "completed"}
    await responses.save(done, conversation)
    assert await responses.response("resp_1") == done


# -- devices -----------------------------------------------------------------------------------
async def test_input_items_and_deleting_a_response(backend: Backend) -> None:
    responses = backend.responses
    output = [{"id": "msg_out", "type": "message", "role": "assistant", "content": []}]
    inputs = [{"id": "msg_in", "type": "message", "role": "user", "content": []}]
    await responses.save({"id": "resp_a", "output": output}, [], inputs)
    await responses.save({"id": "resp_b", "output": []}, [])
    assert await responses.input_items("resp_a") == inputs
    assert await responses.input_items("resp_b") == []  # stored without them (a lost run)
    assert await responses.input_items("resp_none") is None
    assert await responses.delete("resp_a") is True
    assert await responses.response("resp_a") is None
    assert await responses.input_items("resp_a") is None
    assert await responses.items(["msg_out"]) == {}
    assert await responses.delete("resp_a") is False
    assert await responses.response("resp_b") is not None


async def test_conversations_keep_their_items_in_order(backend: Backend) -> None:
    store = backend.runtime.item_lists
    assert store is not None
    conversation = {"id": "conv_a", "object": "conversation", "created_at": 1, "metadata": {}}
    first = {"id": "msg_1", "type": "message", "role": "user", "content": []}
    await store.create(conversation, [first])
    await store.create({**conversation, "id": "conv_b"}, [])
    assert await store.get("conv_a") == conversation
    later = [{"id": f"msg_{n}", "type": "message", "content": []} for n in (2, 3)]
    assert await store.append("conv_a", later) is True
    assert await store.append("conv_none", later) is False
    assert [i["id"] for i in await store.items("conv_a") or []] == ["msg_1", "msg_2", "msg_3"]
    assert await store.items("conv_b") == []
    assert await store.items("conv_none") is None
    assert await store.delete_item("conv_a", "msg_2") is True
    assert await store.delete_item("conv_a", "msg_2") is False
    assert [i["id"] for i in await store.items("conv_a") or []] == ["msg_1", "msg_3"]
    await store.update({**conversation, "metadata": {"k": "v"}})
    assert (await store.get("conv_a") or {})["metadata"] == {"k": "v"}
    assert await store.delete("conv_a") is True
    assert await store.get("conv_a") is None and await store.items("conv_a") is None
    assert await store.delete("conv_a") is False
    assert await store.get("conv_b") is not None


async def test_devices_pair_list_check_and_revoke(backend: Backend) -> None:
    devices, now = backend.devices, backend.clock
    assert not await devices.any_paired()
    phone = devices.add("  phone ")
    backend.clock[0] += 1
    tablet = devices.add("tablet")
    assert phone != tablet and await devices.any_paired()
    assert [(d.name, d.created, d.last_seen) for d in devices.devices()] == [
        ("phone", 1000.0, None),
        ("tablet", 1001.0, None),
    ]
    with pytest.raises(DeviceError, match="a device named 'phone' exists"):
        devices.add("phone")
    with pytest.raises(DeviceError, match="1-64 characters"):
        devices.add(" ")

    checked = await devices.check(phone)
    assert (checked.status, checked.name) == ("ok", "phone") and checked.digest is not None
    assert checked.digest not in phone  # only the digest is kept
    assert devices.devices()[0].last_seen == now[0]
    unknown = await devices.check(phone[::-1])
    assert unknown.status == "unknown" and unknown.name is None

    now[0] += TOUCH_EVERY / 2
    assert await devices.revoked([checked.digest]) == set()
    assert devices.devices()[0].last_seen == 1001.0  # not a write every sweep
    now[0] += TOUCH_EVERY
    assert await devices.revoked([checked.digest, checked.digest]) == set()
    assert devices.devices()[0].last_seen == now[0]

    devices.revoke(" phone")
    assert await devices.revoked([checked.digest, "0" * 64]) == {checked.digest, "0" * 64}
    revoked = await devices.check(phone)
    assert (revoked.status, revoked.name) == ("revoked", "phone")
    assert [d.name for d in devices.devices()] == ["tablet"]
    with pytest.raises(DeviceError, match="no device named 'phone'"):
        devices.revoke("phone")
    again = devices.add("phone")  # the name is free once revoked; the old token stays refused
    assert (await devices.check(again)).status == "ok"
    assert (await devices.check(phone)).status == "revoked"
    assert await devices.revoked([]) == set()
    devices.revoke("phone")
    devices.revoke("tablet")
    assert not await devices.any_paired()


# -- a lost store ------------------------------------------------------------------------------
async def test_a_lost_redis_is_store_unavailable_everywhere(redis_server: RedisServer) -> None:
    config = Config.model_validate(
        {"store": {"path": ":memory:", "url": redis_server.url}, "model": {"name": "m"}}
    )
    runtime = Runtime.create(config)
    try:
        redis_server.kill()
        attempts: list[Callable[[], Awaitable[object]]] = [
            lambda: runtime.sessions.transcript("s"),
            lambda: runtime.sessions.append("s", [say("user", "q")]),
            lambda: runtime.sessions.summaries("iris:", 5),
            lambda: runtime.responses.response("resp_1"),
            lambda: runtime.devices.check("token"),
        ]
        for attempt in attempts:
            with pytest.raises(StoreUnavailable):
                await attempt()
        with pytest.raises(StoreUnavailable):
            runtime.devices.add("phone")
    finally:
        if runtime.shared is not None:
            runtime.shared.close()
        runtime.store.close()


async def test_the_first_read_after_redis_restarts_is_served(redis_server: RedisServer) -> None:
    config = Config.model_validate(
        {"store": {"path": ":memory:", "url": redis_server.url}, "model": {"name": "m"}}
    )
    runtime = Runtime.create(config)
    try:
        await runtime.sessions.append("s", [say("user", "q")])
        redis_server.stop()
        redis_server.start()  # the pooled connection is to the old server (AOF kept the data)
        assert await runtime.sessions.history("s") == [say("user", "q")]
    finally:
        if runtime.shared is not None:
            runtime.shared.close()
        runtime.store.close()


async def test_threads_the_bot_answered_in_are_kept_and_expire(backend: Backend) -> None:
    """Which threads the bot answered in outlives the process (a follow-up needs no mention
    after a restart): in the SQLite file, or in Redis for every process, with an expiry."""
    threads = backend.runtime.threads
    assert threads is not None
    key = "telegram:-100:topic=7"
    assert not await threads.answered(key)
    await threads.mark(key)
    assert await threads.answered(key) and not await threads.answered("telegram:-100:topic=8")
    shared = backend.runtime.shared
    if shared is not None:
        assert 0 < int(await shared.aio.ttl(shared.chat_key(key, "answered"))) <= KEPT_S
    else:  # a mark older than KEPT_S no longer counts
        long_ago = SqliteThreads(backend.runtime.store, clock=lambda: time.time() - KEPT_S - 1)
        await long_ago.mark("telegram:-100:topic=9")
        assert not await threads.answered("telegram:-100:topic=9")

"""Turn limits on the iris socket: ``server.max_turns`` across chats and tokens, and
``platforms.iris.max_turns_per_token`` across one token's chats. Over a limit the device gets
``error {code: "busy"}`` at once and nothing reaches the upstream."""

from __future__ import annotations

import asyncio

from tests.fakes.upstream import FakeUpstream, hold, text
from tests.socket.conftest import TOKEN, StartServer

STREAMING = {"enabled": True}


async def test_one_token_may_not_run_more_than_its_turns_at_once(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Hel"), text("later"))
    server = await iris_server(streaming=STREAMING, iris={"max_turns_per_token": 1})
    first = await server.connect(chat_id="a")
    second = await server.connect(chat_id="b")
    await first.send({"type": "message.send", "text": "hi"})
    assert await asyncio.to_thread(upstream.gate_reached.wait, 5)
    await second.send({"type": "message.send", "text": "hi too"})
    refused = await second.until("error")
    assert refused[-1]["code"] == "busy"
    assert len(upstream.requests) == 1  # the refused turn never reached the model
    upstream.release()
    await first.until("typing", on=False)
    # The slot came back with the end of the first turn.
    await second.send({"type": "message.send", "text": "now?"})
    frames = await second.until("message.stop")
    assert frames[-1]["final_text"] == "later"


async def test_max_turns_counts_every_token_and_chat(
    iris_server: StartServer, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Hel"))
    server = await iris_server(
        streaming=STREAMING, server={"max_turns": 1}, iris={"tokens": [TOKEN, "t2"]}
    )
    first = await server.connect(chat_id="a")
    other = await server.connect("t2", chat_id="b")
    await first.send({"type": "message.send", "text": "hi"})
    assert await asyncio.to_thread(upstream.gate_reached.wait, 5)
    await other.send({"type": "message.send", "text": "me too"})
    refused = await other.until("error")
    assert refused[-1]["code"] == "busy"
    upstream.release()
    await first.until("typing", on=False)
    assert len(upstream.requests) == 1

"""Finding 8 of the second pass: rooms were never dropped, so 10 000 unused chat ids cost
~300 B of RSS each for ever. A room with no device and nothing under way is dropped now, and
the chat comes back from the log on the next hello."""

from __future__ import annotations

import asyncio

from tests.fakes.upstream import FakeUpstream, text
from tests.socket.conftest import StartServer, iris_server  # noqa: F401  (fixture)


async def test_unused_rooms_are_dropped_and_come_back_from_the_log(
    iris_server: StartServer,  # noqa: F811
    upstream: FakeUpstream,
) -> None:
    upstream.script(text("Hello there"))
    server = await iris_server()
    surface = server.surface
    talker = await server.connect(chat_id="kept")
    await talker.send({"type": "message.send", "text": "hi"})
    await talker.turn()
    for n in range(200):  # chat ids nobody uses past their hello
        device = await server.connect(chat_id=f"unused-{n}")
        await device.close()
    await talker.close()
    async with asyncio.timeout(10):  # the server's handlers see the closes
        # No event to wait on: the handlers unsubscribe after the close handshake.
        while any(surface.hub.subscriptions(chat) for chat in surface.rooms):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    assert len(surface.rooms) >= 201
    assert surface.drop_idle_rooms() >= 201
    assert surface.rooms == {}
    # The chat is back, whole, for the next device.
    again = await server.connect(chat_id="kept", after_seq=0)
    frames = await again.until("typing", on=False)
    assert any(
        f.get("final_text") == "Hello there" or f.get("text") == "Hello there" for f in frames
    )
    assert "kept" in surface.rooms


async def test_a_room_with_a_device_or_a_turn_is_kept(
    iris_server: StartServer,  # noqa: F811
    upstream: FakeUpstream,
) -> None:
    server = await iris_server()
    await server.connect(chat_id="watched")
    assert server.surface.drop_idle_rooms() == 0
    assert "watched" in server.surface.rooms

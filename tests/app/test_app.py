"""The app against a scripted iris server on 127.0.0.1, through Textual's run_test + Pilot."""

from __future__ import annotations

import asyncio

from iris.app.widgets.bubble import MessageBubble
from iris.app.widgets.reasoning_block import ReasoningBlock
from iris.app.widgets.toolcard import ToolCard
from tests.fakes.iris_server import FakeIrisServer, full_turn

from .driver import SIZE, bubbles, make_app, screen_text, settled, until


async def test_full_turn_renders_in_order(server: FakeIrisServer) -> None:
    server.script(*full_turn())
    app = make_app(server.url, smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.click("#composer")
        await pilot.press(*"summarize the repo", "enter")
        sent = await server.wait_for("message.send")
        assert sent["text"] == "summarize the repo"
        await until(pilot, lambda: len(bubbles(app)) == 4 and settled(app))
        user, m1, m2, m3 = bubbles(app)
        assert user.has_class("user") and user.bubble.text == "summarize the repo"
        assert m1.has_class("commentary") and m2.has_class("commentary")
        assert not m3.has_class("commentary")
        # The tool card hangs under the bubble of its segment; reasoning sits above the answer.
        [card] = m1.query(ToolCard)
        assert card.call.ok
        await until(pilot, lambda: '✓ 💻 terminal: "ls -la" · 0.4s' in screen_text(app))
        reasoning = m3.query_one(ReasoningBlock)
        assert m3.children.index(reasoning) < m3.children.index(m3.body)
        await until(pilot, lambda: "fake-model · 42 tokens" in screen_text(app))
        assert not app.store.typing


async def test_streaming_bubble_waits_for_the_reveal_and_shows_a_cursor(
    server: FakeIrisServer,
) -> None:
    release = asyncio.Event()
    answer = "word " * 60
    server.script(
        {"type": "message.start", "message_id": "m1", "role": "assistant"},
        {"type": "message.update", "message_id": "m1", "text": answer[:100]},
        release,
        {"type": "message.stop", "message_id": "m1", "final_text": answer},
    )
    app = make_app(server.url, smoothness=0.8)  # 75 chars/s: the reveal takes seconds
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: len(bubbles(app)) == 2 and len(bubbles(app)[1].bubble.shown) > 0)
        bubble = bubbles(app)[1]
        await until(pilot, lambda: "▉" in screen_text(app))
        release.set()
        await until(pilot, lambda: bubble.bubble.stopped)
        assert bubble.streaming  # stopped, but still revealing
        await until(pilot, lambda: settled(app), within=10)
        await until(pilot, lambda: "▉" not in screen_text(app))
        assert bubble.bubble.shown == answer


async def test_dropped_connection_resumes_after_the_last_seq(server: FakeIrisServer) -> None:
    release = asyncio.Event()
    server.script(
        {"type": "message.start", "message_id": "m1", "role": "assistant"},
        {"type": "message.update", "message_id": "m1", "text": "Part one."},
        release,
        {"type": "message.update", "message_id": "m1", "text": "Part one. Part two."},
        {"type": "message.stop", "message_id": "m1", "final_text": "Part one. Part two."},
    )
    app = make_app(server.url, smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"hi", "enter")
        await until(pilot, lambda: app.store.last_seq == 2)
        await server.drop()
        await until(pilot, lambda: app.status.state == "reconnecting")
        await until(pilot, lambda: "reconnecting" in screen_text(app))
        release.set()  # the rest of the turn happens while the app is away
        await server.wait_until(lambda: server.seq == 4)
        resume = await server.wait_for("resume", count=2)  # the first was at start-up
        assert resume["after_seq"] == 2
        await until(pilot, lambda: app.status.state == "connected" and settled(app))
        assert [b.bubble.shown for b in bubbles(app)] == ["hi", "Part one. Part two."]
        assert server.accepted == 2


async def test_sync_replaces_the_view_when_the_log_is_gone(server: FakeIrisServer) -> None:
    app = make_app(server.url)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await server.emit(
            {"type": "message", "message_id": "a1", "role": "assistant", "text": "old"}
        )
        await until(pilot, lambda: len(bubbles(app)) == 1)
        server.sync_on_resume = True
        await server.emit({"type": "message", "message_id": "u1", "role": "user", "text": "q"})
        await server.drop()
        await until(pilot, lambda: app.store.epoch == 1 and len(bubbles(app)) == 2)
        assert [b.bubble.text for b in bubbles(app)] == ["old", "q"]


async def test_without_a_server_the_app_says_how_to_start_one() -> None:
    async with FakeIrisServer() as stopped:
        url = stopped.url
    app = make_app(url)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.status.state == "offline")
        assert "iris serve" in app.status.detail
        assert "platforms.iris.tokens" in app.status.detail


async def test_bad_token_is_reported_and_not_retried(server: FakeIrisServer) -> None:
    app = make_app(server.url, token="wrong")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.status.state == "unauthorized")
        assert "4401" in app.status.detail
        assert server.accepted == 0


async def test_message_from_another_device_appears(server: FakeIrisServer) -> None:
    app = make_app(server.url)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await server.emit(
            {"type": "message", "message_id": "u7", "role": "user", "text": "from my phone"}
        )
        await until(pilot, lambda: len(bubbles(app)) == 1)
        assert bubbles(app)[0].has_class("user")
        assert isinstance(bubbles(app)[0], MessageBubble)


async def test_start_up_shows_the_chat_so_far(server: FakeIrisServer) -> None:
    await server.emit({"type": "message", "message_id": "u1", "role": "user", "text": "earlier q"})
    await server.emit({"type": "message.start", "message_id": "m1", "role": "assistant"})
    await server.emit({"type": "message.update", "message_id": "m1", "text": "earlier answer"})
    await server.emit({"type": "message.stop", "message_id": "m1", "final_text": "earlier answer"})
    app = make_app(server.url)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(bubbles(app)) == 2 and settled(app))
        assert [b.bubble.text for b in bubbles(app)] == ["earlier q", "earlier answer"]
        assert (await server.wait_for("resume"))["after_seq"] == 0

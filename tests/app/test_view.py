"""What a user sees while a reply streams: settled blocks stay put, lists stay whole, the
view follows only when at the bottom, typing, reasoning copy and the HTML artifact card."""

from __future__ import annotations

import re
from pathlib import Path

from textual.containers import VerticalScroll

from iris.app.widgets.artifact_card import ArtifactCard, artifact_path
from iris.app.widgets.reasoning_block import ReasoningBlock
from tests.fakes.iris_server import FakeIrisServer

from .driver import SIZE, bubbles, make_app, screen_text, settled, until

REPLY = "".join(
    f"## Part {n}\n\nSome text for part {n} with `code` and **bold**.\n\n"
    f"```python\nprint({n})\n```\n\n| k | v |\n| - | - |\n| {n} | {n * n} |\n\n"
    for n in range(1, 7)
)


async def stream(server: FakeIrisServer, message_id: str, text: str, step: int) -> None:
    await server.emit({"type": "message.start", "message_id": message_id, "role": "assistant"})
    for end in range(step, len(text) + step, step):
        await server.emit({"type": "message.update", "message_id": message_id, "text": text[:end]})
    await server.emit({"type": "message.stop", "message_id": message_id, "final_text": text})


async def test_settled_blocks_are_drawn_once_and_the_tail_at_most_once_a_frame(
    server: FakeIrisServer,
) -> None:
    app = make_app(server.url, smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await stream(server, "m1", REPLY, 24)
        await until(pilot, lambda: len(bubbles(app)) == 1)
        [bubble] = bubbles(app)
        start_frame, start_paints = app._frame, bubble.body.tail_paints
        blocks = bubble.body.settled
        await until(pilot, lambda: len(blocks.blocks) >= 6, within=10)
        early = list(blocks.blocks)
        await until(pilot, lambda: settled(app), within=15)
        await until(pilot, lambda: "Part 6" in (t := screen_text(app)) and "▉" not in t)
        # The same blocks, in place, each rendered exactly once while the reply grew.
        assert all(a is b for a, b in zip(early, blocks.blocks[: len(early)], strict=True))
        assert blocks.renders == len(blocks.blocks) > len(early)
        assert bubble.body.tail_paints - start_paints <= app._frame - start_frame + 1


async def test_an_open_bold_in_the_streaming_tail_shows_bold_not_asterisks(
    server: FakeIrisServer,
) -> None:
    """The tail is healed as the browser's is (iris.app.core.heal): while the reply is
    mid-``**bold``, the screen shows the word, not the markers waiting for their closer."""
    app = make_app(server.url, smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await server.emit({"type": "message.start", "message_id": "m1", "role": "assistant"})
        await server.emit({"type": "message.update", "message_id": "m1", "text": "It is **very"})
        await until(pilot, lambda: "very" in screen_text(app))
        assert "**" not in screen_text(app)
        await server.emit({"type": "message.stop", "message_id": "m1", "final_text": "It is."})
        await until(pilot, lambda: settled(app))


async def test_an_ordered_list_streamed_by_character_stays_one_list(
    server: FakeIrisServer,
) -> None:
    app = make_app(server.url, smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await stream(server, "m1", "1. one\n\n2. two\n\n3. three", 1)
        await until(pilot, lambda: settled(app), within=10)
        [bubble] = bubbles(app)
        kinds = [token.type for token in bubble.body.tokens()]  # type: ignore[attr-defined]
        assert kinds.count("ordered_list_open") == 1
        numbered = re.compile(r"1\.? one\n.*2\.? two\n.*3\.? three")
        await until(pilot, lambda: bool(numbered.search(screen_text(app))))


async def test_view_follows_new_text_only_while_at_the_bottom(server: FakeIrisServer) -> None:
    app = make_app(server.url)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        chat = app.query_one("#chat", VerticalScroll)
        for n in range(12):
            text = f"message {n}\n\nwith a second paragraph"
            await server.emit(
                {"type": "message", "message_id": f"a{n}", "role": "assistant", "text": text}
            )
        await until(pilot, lambda: len(bubbles(app)) == 12 and settled(app))
        await until(pilot, lambda: chat.max_scroll_y > 0 and chat.scroll_y == chat.max_scroll_y)
        chat.focus()
        await pilot.press("pageup")  # the user reads back
        await until(pilot, lambda: chat.scroll_y < chat.max_scroll_y)
        held = chat.scroll_y
        await server.emit(
            {"type": "message", "message_id": "b1", "role": "assistant", "text": "new"}
        )
        await until(pilot, lambda: len(bubbles(app)) == 13 and settled(app))
        await pilot.pause()
        assert chat.scroll_y == held  # not yanked to the bottom
        await pilot.press("end")  # back at the bottom: following again
        await until(pilot, lambda: chat.scroll_y == chat.max_scroll_y)
        await server.emit(
            {"type": "message", "message_id": "b2", "role": "assistant", "text": "newer"}
        )
        await until(pilot, lambda: len(bubbles(app)) == 14 and settled(app))
        await until(pilot, lambda: chat.scroll_y == chat.max_scroll_y)


async def test_typing_indicator_until_the_first_message_start(server: FakeIrisServer) -> None:
    app = make_app(server.url)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await server.emit({"type": "typing", "on": True})
        await until(pilot, lambda: "iris is typing" in screen_text(app))
        await server.emit({"type": "message.start", "message_id": "m1", "role": "assistant"})
        await until(pilot, lambda: "iris is typing" not in screen_text(app))
        await server.emit({"type": "typing", "on": True})
        await until(pilot, lambda: "iris is typing" in screen_text(app))
        await server.emit({"type": "typing", "on": False})
        await until(pilot, lambda: "iris is typing" not in screen_text(app))


async def test_reasoning_sits_above_the_answer_and_copies(server: FakeIrisServer) -> None:
    long = "step\n" * 30
    app = make_app(server.url)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await server.emit(
            {
                "type": "message.stop",
                "message_id": "m1",
                "final_text": "Answer.",
                "reasoning": "short thought",
            }
        )
        await server.emit(
            {"type": "message.stop", "message_id": "m2", "final_text": "Two.", "reasoning": long}
        )
        await until(pilot, lambda: len(app.query(ReasoningBlock)) == 2 and settled(app))
        short_block, long_block = app.query(ReasoningBlock)
        assert not short_block.collapsed and long_block.collapsed  # long starts collapsed
        await until(pilot, lambda: "short thought" in (t := screen_text(app)) and "Answer." in t)
        text = screen_text(app)
        assert text.index("short thought") < text.index("Answer.")
        await pilot.click("#copy-reasoning")
        await until(pilot, lambda: app.clipboard == "short thought")


async def test_html_artifact_card_after_the_reveal(
    server: FakeIrisServer, isolated_home: Path
) -> None:
    page = "<!DOCTYPE html><html><body><h1>Hi</h1></body></html>"
    reply = f"Here is the page:\n\n```html\n{page}\n```\n"
    app = make_app(server.url, smoothness=0.8)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await stream(server, "m1", reply, 24)
        await until(pilot, lambda: len(bubbles(app)) == 1 and bubbles(app)[0].bubble.stopped)
        assert bubbles(app)[0].streaming and not app.query(ArtifactCard)  # still revealing
        await until(pilot, lambda: len(app.query(ArtifactCard)) == 1, within=10)
        await until(pilot, lambda: app.query_one("#save-artifact").region.width > 0)
        assert "🌐 HTML artifact" in screen_text(app)
        await pilot.click("#save-artifact")
        await until(pilot, lambda: artifact_path("m1").exists())
        assert artifact_path("m1").read_text() == page + "\n"
        assert artifact_path("m1").is_relative_to(isolated_home)


async def test_tool_card_spins_until_it_ends_then_marks_failure(server: FakeIrisServer) -> None:
    app = make_app(server.url)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"run it", "enter")
        await server.emit(
            {
                "type": "tool.start",
                "index": 1,
                "name": "terminal",
                "preview": "make test",
                "args": {"command": "make test"},
            }
        )
        spinner = re.compile(r'[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] 💻 terminal: "make test"')
        await until(pilot, lambda: bool(spinner.search(screen_text(app))))
        await server.emit(
            {"type": "tool.progress", "index": 1, "name": "terminal", "note": "running 12 tests"}
        )
        await until(pilot, lambda: "running 12 tests" in screen_text(app))
        await server.emit(
            {
                "type": "tool.end",
                "index": 1,
                "name": "terminal",
                "ok": False,
                "duration": 2.5,
                "output_preview": "1 failed",
            }
        )
        await until(pilot, lambda: '✗ 💻 terminal: "make test" · 2.5s' in screen_text(app))
        assert not spinner.search(screen_text(app))


async def test_escape_asks_the_server_to_stop_the_reply(server: FakeIrisServer) -> None:
    app = make_app(server.url)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press("escape")
        assert (await server.wait_for("turn.cancel"))["type"] == "turn.cancel"

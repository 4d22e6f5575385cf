"""The app against the real ``iris serve`` app (not the scripted server): the real agent on the
fake OpenAI upstream, the real iris socket, the app through Textual's run_test + Pilot."""

from __future__ import annotations

import pytest

from iris.app.app import IrisApp
from iris.app.widgets.reasoning_block import ReasoningBlock
from iris.app.widgets.toolcard import ToolCard
from tests.fakes.upstream import FakeUpstream, reasoning, text, tool_call

from .driver import SIZE, bubbles, make_app, screen_text, settled, until

pytestmark = pytest.mark.timeout(30)


async def test_a_tool_turn_from_the_real_server_renders_in_order(
    iris_url: str, upstream: FakeUpstream
) -> None:
    upstream.script(
        tool_call("terminal", ['{"command": "ls"}'], content="Let me look."),
        reasoning(["The user wants ", "a list."], ["There is ", "**one** file."]),
    )
    app: IrisApp = make_app(iris_url, "device-token-0123456789", smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.click("#composer")
        await pilot.press(*"what is here?", "enter")
        await until(pilot, lambda: len(bubbles(app)) == 3 and settled(app), within=15)
        user, commentary, answer = bubbles(app)
        assert user.bubble.text == "what is here?"
        assert commentary.has_class("commentary") and commentary.bubble.text == "Let me look."
        [card] = commentary.query(ToolCard)
        assert card.call.ok
        assert answer.bubble.text == "There is **one** file."
        block = answer.query_one(ReasoningBlock)
        assert answer.children.index(block) < answer.children.index(answer.body)
        await until(pilot, lambda: "fake-model" in screen_text(app), within=10)
        assert not app.store.typing
    upstream.assert_used_up()


@pytest.mark.parametrize("iris_url", [True], indirect=True)
async def test_the_app_asks_for_appends_and_shows_the_same_text(
    iris_url: str, upstream: FakeUpstream
) -> None:
    chunks = ["中文 ", "😀 ", "e\u0301 ", "👨‍👩‍👧 ", "word ", "𠀋字 "] * 10
    upstream.script(text(*chunks))
    app: IrisApp = make_app(iris_url, "device-token-0123456789", smoothness=0.2)
    seen: list[dict[str, object]] = []
    apply = app.store.apply

    def recorded(frame: dict[str, object]) -> None:
        seen.append(dict(frame))
        apply(frame)

    app.store.apply = recorded  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.click("#composer")
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: len(bubbles(app)) == 2 and settled(app), within=15)
        assert bubbles(app)[1].bubble.text == "".join(chunks).rstrip()
    kinds = [frame["type"] for frame in seen]
    assert seen[0].get("features") == ["append"]
    assert "message.append" in kinds and "message.update" not in kinds
    # No append failed to fit: that would have brought a snapshot (message.update) after it.
    upstream.assert_used_up()

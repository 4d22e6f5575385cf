"""An MCP server asking the person for input, in the Textual app (run_test + Pilot): against the
real ``iris serve`` app with the fake MCP server (``tests/fakes/mcp_server.py``, the ``mcp``
SDK's ``ctx.elicit``) as a stdio child, and against the scripted iris server for a link."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button, Checkbox, Input, Link, Select

from iris.app.app import IrisApp
from iris.app.widgets.elicitation_panel import ElicitationPanel
from iris.app.widgets.toolcard import ToolCard
from iris.server.asgi import UVICORN_WS_OPTIONS, build_app
from tests.conftest import MakeConfig
from tests.fakes import loopback
from tests.fakes.iris_server import FakeIrisServer
from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import FakeUpstream, text, tool_call

from .driver import SIZE, make_app, until

pytestmark = pytest.mark.timeout(60)
DEVICE = "device-token-0123456789"


@pytest.fixture
async def iris_url(make_config: MakeConfig, upstream: FakeUpstream) -> AsyncIterator[str]:
    """The real server with the fake MCP server; tools run unasked (only the server asks)."""
    config = make_config(
        upstream.base_url,
        platforms={"iris": {"tokens": [DEVICE]}, "api_server": {"enabled": False}},
        tools={"approval": {"mode": "off", "timeout": 30}},
        mcp_servers={"fake": stdio()},
    )
    sock = loopback.bind()
    server = await loopback.start(build_app(config), sock, **UVICORN_WS_OPTIONS)
    yield f"ws://127.0.0.1:{sock.getsockname()[1]}/iris/ws"
    await loopback.stop(server)


def panel(app: IrisApp) -> ElicitationPanel:
    return app.query_one(ElicitationPanel)


def shown(app: IrisApp) -> str:
    return "\n".join(str(s.render()) for s in panel(app).query("Static"))


def live(app: IrisApp) -> bool:
    return len(panel(app).query(Button)) == 3


def told(upstream: FakeUpstream) -> str:
    return str(upstream.requests[1].body["messages"][-1]["content"])


def tool_output(app: IrisApp) -> str:
    return "".join(card.call.output_preview for card in app.query(ToolCard))


async def test_the_form_asks_an_enum_and_a_number_and_a_refused_answer_keeps_it_open(
    iris_url: str, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("mcp_fake_paint", ["{}"]), text("Painted."))
    app = make_app(iris_url, DEVICE, smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"paint it", "enter")
        await until(pilot, lambda: live(app), within=20)
        assert "fake asks: Which colour?" in shown(app)
        # The enum is a choice; the required fields are marked.
        assert "Color * (The colour)" in shown(app)
        assert "Coats * (How many coats)" in shown(app)
        choice = panel(app).query_one("#elicit-field-0", Select)
        labels = [str(option[0]) for option in choice._options if option[1] != Select.NULL]  # pyright: ignore[reportPrivateUsage]
        assert labels == ["red", "green", "blue"]
        choice.value = 1
        await pilot.click("#elicit-field-1")
        await pilot.press("9")
        await pilot.click("#elicit-accept")
        # 9 coats is more than the schema's maximum: the server says why, the form stays.
        await until(pilot, lambda: "at most 5" in shown(app), within=10)
        assert live(app)
        assert panel(app).query_one("#elicit-field-1", Input).value == "9"
        assert panel(app).query_one("#elicit-field-0", Select).value == 1
        await pilot.click("#elicit-field-1")
        await pilot.press("end", "backspace", "2")
        await pilot.click("#elicit-accept")
        await until(pilot, lambda: "Answered by token" in shown(app), within=15)
        assert not panel(app).query(Button)
        await until(pilot, lambda: "painted green x2" in tool_output(app), within=15)
    assert told(upstream) == "painted green x2"


async def test_a_confirmation_is_a_checkbox_and_decline_reaches_the_server(
    iris_url: str, upstream: FakeUpstream
) -> None:
    upstream.script(
        tool_call("mcp_fake_delete", ['{"path": "a.txt"}']),
        text("Kept."),
        tool_call("mcp_fake_delete", ['{"path": "b.txt"}']),
        text("Not asked."),
    )
    app = make_app(iris_url, DEVICE, smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"delete a", "enter")
        await until(pilot, lambda: live(app), within=20)
        box = panel(app).query_one("#elicit-field-0", Checkbox)
        assert str(box.label) == "Sure * (Really delete it?)"
        await pilot.click("#elicit-accept")  # unticked: sure is false
        await until(pilot, lambda: "kept a.txt" in tool_output(app), within=15)
        await until(pilot, lambda: len(app.query(ElicitationPanel)) == 1)
    assert told(upstream) == "kept a.txt"


async def test_decline_reaches_the_server(iris_url: str, upstream: FakeUpstream) -> None:
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Not deleted."))
    app = make_app(iris_url, DEVICE, smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"delete a", "enter")
        await until(pilot, lambda: live(app), within=20)
        await pilot.click("#elicit-decline")
        await until(pilot, lambda: "Declined by token" in shown(app), within=15)
        await until(pilot, lambda: "not deleted (decline)" in tool_output(app), within=15)
    assert told(upstream) == "not deleted (decline)"


def url_request(**extra: Any) -> dict[str, Any]:
    return {
        "type": "elicitation.request",
        "elicitation_id": "elic_0a1",
        "server": "printer",
        "message": "Sign in to the printer",
        "schema": {},
        "url": "https://printer.test/in",
        "expires_at": 2_000_000_000.0,
        **extra,
    }


async def test_a_url_request_is_shown_as_a_link(server: FakeIrisServer) -> None:
    server.script(url_request())
    app = IrisApp(
        make_app(server.url).settings,
        settings_file=Path.home() / ".iris" / "app.json",
        retry_min=0.05,
    )
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"print", "enter")
        await until(pilot, lambda: live(app))
        link = panel(app).query_one("#elicit-link", Link)
        assert link.url == "https://printer.test/in"
        assert str(panel(app).query_one("#elicit-accept", Button).label) == "Open and continue"
        await pilot.click("#elicit-accept")
        sent = await server.wait_for("elicitation.respond")
        assert (sent["elicitation_id"], sent["action"]) == ("elic_0a1", "accept")
        assert "content" not in sent
        await server.emit(
            {
                "type": "elicitation.resolved",
                "elicitation_id": "elic_0a1",
                "action": "accept",
                "by": "tui",
            }
        )
        await until(pilot, lambda: "Answered by tui" in shown(app))

"""The approval card in the Textual app, through run_test + Pilot: against the scripted iris
server (the frames exactly as the contract has them) and against the real ``iris serve`` app
(the real agent asking before it runs ``terminal``)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button, Collapsible

from iris.app.app import IrisApp
from iris.app.settings import Settings
from iris.app.widgets.approval_panel import ApprovalPanel
from iris.app.widgets.toolcard import ToolCard
from iris.server.asgi import UVICORN_WS_OPTIONS, build_app
from tests.conftest import MakeConfig, anywhere
from tests.fakes import loopback
from tests.fakes.iris_server import FakeIrisServer
from tests.fakes.upstream import FakeUpstream, text, tool_call

from .clock import FakeClock
from .driver import SIZE, bubbles, make_app, settled, until

pytestmark = pytest.mark.timeout(30)
DEVICE = "device-token-0123456789"

LONG = "\n".join(f"echo step {n} && sleep 0" for n in range(40)) + "\nrm -rf /tmp/the-end"


def panels(app: IrisApp) -> list[ApprovalPanel]:
    return list(app.query(ApprovalPanel))


def shown(panel: ApprovalPanel) -> str:
    """Every text the card holds (collapsed blocks included), as plain strings."""
    return "\n".join(str(s.render()) for s in panel.query("Static"))


def buttons(panel: ApprovalPanel) -> list[Button]:
    return list(panel.query(Button))


def request(**extra: Any) -> dict[str, Any]:
    return {
        "type": "approval.request",
        "approval_id": "appr_a1",
        "index": 1,
        "name": "terminal",
        "args": {"command": LONG},
        "preview": LONG,
        "expires_at": 1_090.0,
        **extra,
    }


def app_for(server: FakeIrisServer, clock: FakeClock) -> IrisApp:
    settings = Settings(url=server.url, token="device-token")
    return IrisApp(
        settings, wall_clock=clock, retry_min=0.05, settings_file=Path.home() / ".iris" / "app.json"
    )


async def test_the_card_shows_the_whole_command_and_sends_the_press(
    server: FakeIrisServer,
) -> None:
    release = asyncio.Event()
    server.script(
        {"type": "typing", "on": True},
        {"type": "tool.start", "index": 1, "name": "terminal", "preview": "…", "args": {}},
        request(),
        release,
    )
    clock = FakeClock(1_000.0)
    app = app_for(server, clock)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"build", "enter")
        await until(pilot, lambda: len(panels(app)) == 1 and len(buttons(panels(app)[0])) == 3)
        [panel] = panels(app)
        assert [str(b.label) for b in buttons(panel)] == [
            "Allow once",
            "Allow in this chat",
            "Deny",
        ]
        assert LONG in shown(panel)  # whole, in a collapsed block that scrolls
        block = panel.query_one("#approval-block-command", Collapsible)
        assert block.collapsed and "41 lines" in block.title
        assert "1:30" in shown(panel)
        clock.advance(30)
        await until(pilot, lambda: "1:00" in shown(panel))  # the countdown runs
        await pilot.click("#approval-once")
        sent = await server.wait_for("approval.respond")
        assert {k: sent[k] for k in ("approval_id", "decision")} == {
            "approval_id": "appr_a1",
            "decision": "once",
        }
        await until(pilot, lambda: all(b.disabled for b in buttons(panels(app)[0])))
        await server.emit(
            {"type": "approval.resolved", "approval_id": "appr_a1", "decision": "once", "by": "tui"}
        )
        await until(pilot, lambda: "Allowed once by tui" in shown(panels(app)[0]))
        assert not buttons(panels(app)[0])
        release.set()


async def test_the_buttons_go_dead_when_the_countdown_runs_out(server: FakeIrisServer) -> None:
    server.script(request(preview="ls", args={"command": "ls"}))
    clock = FakeClock(1_000.0)
    app = app_for(server, clock)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: live(app))
        assert not any(b.disabled for b in buttons(panels(app)[0]))
        clock.advance(90)
        await until(pilot, lambda: all(b.disabled for b in buttons(panels(app)[0])))
        assert "0:00" in shown(panels(app)[0])


async def test_model_text_in_the_card_is_never_markup(server: FakeIrisServer) -> None:
    sneaky = "[bold red]x[/] [link=https://evil.example]click[/link] [@click=app.quit]q[/]"
    server.script(request(name=sneaky, preview=sneaky, args={"c": sneaky}))
    app = app_for(server, FakeClock(1_000.0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: len(panels(app)) == 1)
        text = shown(panels(app)[0])
        assert sneaky in text  # the brackets as written, not styles or links
        assert app.is_running


async def test_a_late_press_shows_already_decided(server: FakeIrisServer) -> None:
    server.script(request(preview="ls", args={"command": "ls"}))
    app = app_for(server, FakeClock(1_000.0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: len(panels(app)) == 1 and len(buttons(panels(app)[0])) == 3)
        for _ in range(20):  # the keyboard reaches the buttons from the composer
            await pilot.press("tab")
            if app.focused is not None and app.focused.id == "approval-deny":
                break
        await pilot.press("enter")
        assert (await server.wait_for("approval.respond"))["decision"] == "deny"
        # Another device was first: the chat hears its decision, this one hears it was late.
        await server.emit(
            {"type": "approval.resolved", "approval_id": "appr_a1", "decision": "once", "by": "web"}
        )
        late = {"type": "error", "code": "approval_decided", "message": "already decided"}
        for connection in list(server.connections):
            await connection.send(json.dumps(late))
        await until(pilot, lambda: "Already decided" in shown(panels(app)[0]))
        assert "Allowed once by web" in shown(panels(app)[0])
        assert not buttons(panels(app)[0])


async def test_a_device_that_reconnects_while_pending_shows_the_card_again(
    server: FakeIrisServer,
) -> None:
    server.script(request(preview="ls", args={"command": "ls"}))
    first = app_for(server, FakeClock(1_000.0))
    async with first.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: first.connection.connected)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: len(panels(first)) == 1)
    # A fresh start of the app (the chat from seq 0): the log's request comes back, live.
    again = app_for(server, FakeClock(1_060.0))
    async with again.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(panels(again)) == 1 and len(buttons(panels(again)[0])) == 3)
        assert "0:30" in shown(panels(again)[0])


# -- against the real server: the agent waits for the card's answer ------------------------------


@pytest.fixture(params=[60.0])
async def iris_url(
    request: pytest.FixtureRequest, make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> AsyncIterator[str]:
    """The real server, asking before ``terminal`` runs (parametrize indirectly with the
    request's timeout in seconds)."""
    approval = {"mode": "ask", "timeout": request.param}
    config = make_config(
        upstream.base_url,
        platforms={"iris": {"tokens": [DEVICE]}, "api_server": {"enabled": False}},
        tools={"terminal": {"cwd": str(tmp_path)}, "approval": approval},
    )
    sock = loopback.bind()
    server = await loopback.start(build_app(config), sock, **UVICORN_WS_OPTIONS)
    yield f"ws://127.0.0.1:{sock.getsockname()[1]}/iris/ws"
    await loopback.stop(server)


def live(app: IrisApp) -> bool:
    return len(panels(app)) == 1 and len(buttons(panels(app)[0])) == 3


async def stays_put(pilot: Any, widget: Any) -> None:
    """Until ``widget``'s place on the screen is the same across three refreshes."""
    seen, same = None, 0
    async with asyncio.timeout(5):
        while same < 3:
            await pilot.pause(0.02)
            place = widget.region
            same = same + 1 if place == seen else 0
            seen = place


def tool_output(app: IrisApp) -> str:
    return "".join(card.call.output_preview for card in app.query(ToolCard))


async def test_allow_once_runs_the_tool_and_the_card_says_who(
    iris_url: str, upstream: FakeUpstream
) -> None:
    upstream.script(
        tool_call("terminal", ['{"command": "echo approved-$((6*7))"}'], content="Checking."),
        text("It printed approved-42."),
    )
    app = make_app(iris_url, DEVICE, smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"run it", "enter")
        await until(pilot, lambda: live(app), within=10)
        assert "echo approved-$((6*7))" in shown(panels(app)[0])
        assert re.search(r"⏳ [01]:\d\d", shown(panels(app)[0]))
        await pilot.click("#approval-once")
        await until(pilot, lambda: "Allowed once by token" in shown(panels(app)[0]), within=10)
        await until(pilot, lambda: len(bubbles(app)) == 3 and settled(app), within=15)
        assert bubbles(app)[2].bubble.text == "It printed approved-42."
        assert "approved-42" in tool_output(app)  # it ran
        assert not buttons(panels(app)[0])
    upstream.assert_used_up()


async def test_deny_never_runs_the_tool(
    iris_url: str, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(
        tool_call("terminal", ['{"command": "touch ran.txt"}']),
        text("Not approved, so I did not."),
    )
    app = make_app(iris_url, DEVICE, smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"touch it", "enter")
        await until(pilot, lambda: live(app), within=10)
        await pilot.click("#approval-deny")
        await until(pilot, lambda: "Denied by token" in shown(panels(app)[0]), within=10)
        await until(pilot, lambda: len(bubbles(app)) == 3 and settled(app), within=15)
        assert "not approved (denied by token)" in tool_output(app)
    assert not anywhere(tmp_path, "ran.txt")  # not in any workspace either
    told = upstream.requests[1].body["messages"][-1]
    assert told["role"] == "tool" and "not approved" in told["content"]


async def test_a_device_that_reconnects_while_pending_can_still_answer(
    iris_url: str, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("terminal", ['{"command": "echo again"}']), text("Again."))
    app = make_app(iris_url, DEVICE, smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: live(app), within=10)
        connects = app.connection.connects
        await app.connection.drop()  # the network goes; the app reconnects and resumes
        await until(pilot, lambda: app.connection.connects > connects and live(app), within=10)
        # The status line's text (and height) changes back from "reconnecting …": the card
        # moves with it. Click where the button is once it stays put, as a person would.
        await until(pilot, lambda: app.status.state == "connected")
        await stays_put(pilot, app.query_one("#approval-once"))
        await pilot.click("#approval-once")
        await until(pilot, lambda: len(bubbles(app)) == 3 and settled(app), within=15)
        assert "again" in tool_output(app)
        assert "Allowed once by token" in shown(panels(app)[0])


@pytest.mark.parametrize("iris_url", [1.0], indirect=True)
async def test_nobody_answering_times_the_card_out_and_nothing_runs(
    iris_url: str, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(tool_call("terminal", ['{"command": "touch ran.txt"}']), text("Timed out."))
    app = make_app(iris_url, DEVICE, smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"touch it", "enter")
        await until(pilot, lambda: len(panels(app)) == 1, within=10)
        await until(pilot, lambda: "Timed out — not run" in shown(panels(app)[0]), within=10)
        await until(pilot, lambda: len(bubbles(app)) == 3 and settled(app), within=15)
        assert not buttons(panels(app)[0])
    assert not anywhere(tmp_path, "ran.txt")  # not in any workspace either


async def test_a_hidden_character_in_the_command_is_drawn_with_a_warning(
    server: FakeIrisServer,
) -> None:
    # Third pass, finding 4: a zero-width space before "#" made "; touch X" look like a comment.
    spoof = "echo ok \u200b# ; touch X"
    server.script(request(preview=spoof, args={"command": spoof}))
    app = app_for(server, FakeClock(1_000.0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: len(panels(app)) == 1)
        text = shown(panels(app)[0])
        assert "echo ok ⟨U+200B⟩# ; touch X" in text
        assert "⚠ Holds 1 hidden or control character" in text
        assert "\u200b" not in text

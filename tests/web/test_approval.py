"""The approval card in the browser app: the request under its turn with the whole command,
Allow once / Allow in this chat / Deny, the countdown, the decision and who made it, model
text never markup; against the real ``iris serve``, a press deciding what the agent does.
Real chromium. (The card's rules on frame lists, with the Python twin's: tests/webjs.)"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page

from tests.fakes.upstream import text, tool_call

from .conftest import Web, bubbles, send, settled, wait_online, web_on

pytestmark = pytest.mark.timeout(90)

LONG = "\n".join(f"echo step {n}" for n in range(30)) + "\nrm -rf /tmp/the-end"
EVIL = '<img src=x onerror="window.pwned=1"><b>bold</b> & </pre><script>window.pwned=2</script>'


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    """This module's server asks before ``terminal`` runs (the default policy)."""
    with web_on(tmp_path_factory.mktemp("approval"), {"mode": "ask", "timeout": 60}) as running:
        yield running


@pytest.fixture(scope="module")
def phone(web: Web) -> str:
    """The token of a device paired as ``phone`` (``iris devices add phone``): its answers
    name it."""
    ran = subprocess.run(
        [sys.executable, "-m", "iris.cli", "devices", "add", "phone", "--config", str(web.config)],
        env=web.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    link = re.search(r"/#token=(\S+)", ran.stdout)
    assert link is not None, ran.stdout
    return link.group(1)


def request(approval_id: str = "appr_1", **extra: Any) -> dict[str, Any]:
    return {
        "type": "approval.request",
        "approval_id": approval_id,
        "index": 1,
        "name": "terminal",
        "args": {"command": LONG},
        "preview": LONG,
        "expires_at": 4_000_000_000.0,
        **extra,
    }


def resolved(decision: str, by: str, approval_id: str = "appr_1") -> dict[str, Any]:
    return {"type": "approval.resolved", "approval_id": approval_id, "decision": decision, "by": by}


def feed(page: Page, *frames: dict[str, Any]) -> None:
    page.evaluate(
        """(frames) => { for (const f of frames) window.__iris.feed(f);
                         window.__iris.log.render(window.__iris.view); }""",
        list(frames),
    )


def keep_sends(page: Page) -> None:
    """Keep the frames the app sends instead of sending them: these cases' requests were fed
    to the page, the server never made them."""
    page.evaluate("""() => { window.sent = [];
        window.__iris.connection.send = (frame) => { window.sent.push(frame); return true; }; }""")


def test_the_card_holds_the_whole_command_buttons_and_a_countdown(app: Web) -> None:
    page = app.open("approval-card")
    now = page.evaluate("Date.now() / 1000")
    feed(
        page,
        {"type": "tool.start", "index": 1, "name": "terminal", "preview": "…", "args": {}},
        request(expires_at=now + 95),
    )
    card = page.locator(".bubble.approval .approval")
    assert card.locator(".approval-name").text_content() == "terminal"
    assert [b.text_content() for b in card.locator(".approval-actions button").all()] == [
        "Allow once",
        "Allow in this chat",
        "Deny",
    ]
    long = card.locator("details[data-block=command]")
    assert long.get_attribute("open") is None  # long: collapsed, whole, scrollable
    assert (long.locator("summary").text_content() or "").endswith(
        f"31 lines, {len(LONG)} characters"
    )
    assert long.locator("pre").text_content() == LONG
    long.locator("summary").click()
    overflow = long.locator("pre").evaluate("e => getComputedStyle(e).overflowY")
    assert overflow == "auto"
    countdown = card.locator(".approval-countdown")
    first = countdown.text_content()
    assert first in ("1:35", "1:34")
    page.wait_for_function(  # the countdown runs without a frame
        "(t) => document.querySelector('.approval-countdown').textContent !== t", arg=first
    )
    # A change redraws the card; the block the person opened stays open.
    page.evaluate("() => window.__iris.view.answered('appr_1', 'once')")
    feed(page)
    assert page.locator("details[data-block=command]").get_attribute("open") is not None
    assert page.locator(".approval-actions button[disabled]").count() == 3


def test_a_press_sends_the_answer_and_the_decision_replaces_the_buttons(app: Web) -> None:
    page = app.open("approval-press")
    keep_sends(page)
    feed(page, request(preview="ls -la", args={"command": "ls -la"}))
    page.click(".approval-actions .approval-chat")
    assert page.evaluate("window.sent.filter((f) => f.type !== 'ping')") == [
        {"type": "approval.respond", "approval_id": "appr_1", "decision": "chat"}
    ]
    page.wait_for_function("() => document.querySelector('.approval-chat').disabled")
    assert page.get_attribute(".approval-chat", "aria-pressed") == "true"
    feed(page, resolved("chat", "phone"))
    card = page.locator(".bubble.approval .approval")
    assert "resolved" in (card.get_attribute("class") or "")
    assert card.locator("button").count() == 0
    assert card.locator(".approval-countdown").count() == 0
    assert card.locator(".approval-outcome").text_content() == "Allowed in this chat by phone"


def test_a_late_press_says_already_decided(app: Web) -> None:
    page = app.open("approval-late")
    keep_sends(page)
    feed(page, {"type": "typing", "on": True}, request(preview="ls", args={}))
    page.click(".approval-actions .approval-deny")
    late = {"type": "error", "code": "approval_decided", "message": "already decided"}
    feed(page, resolved("once", "laptop"), late)
    card = page.locator(".bubble.approval .approval")
    assert card.locator(".approval-outcome").text_content() == "Allowed once by laptop"
    assert card.locator(".approval-note").text_content() == "Already decided"
    assert page.locator(".bubble.error").count() == 0  # not a failed turn
    assert page.evaluate("window.__iris.view.typing")


def test_the_buttons_go_dead_when_the_countdown_runs_out(app: Web) -> None:
    page = app.open("approval-expiry")
    now = page.evaluate("Date.now() / 1000")
    feed(page, request(expires_at=now + 1.5))
    assert page.locator(".approval-actions button[disabled]").count() == 0
    page.wait_for_function(
        "() => [...document.querySelectorAll('.approval-actions button')].every((b) => b.disabled)"
    )
    assert page.text_content(".approval-countdown") == "0:00"


def test_model_text_in_the_card_is_never_html(app: Web) -> None:
    page = app.open("approval-evil")
    feed(page, request(name=EVIL, preview=EVIL, args={"command": EVIL}))
    card = page.locator(".bubble.approval .approval")
    assert card.locator(".approval-name").text_content() == EVIL
    assert card.locator("pre.approval-text").first.text_content() == EVIL
    assert card.locator("img, b, script").count() == 0
    assert page.evaluate("window.pwned === undefined")


# -- against the real server: the agent waits for the card's answer ------------------------------


def asked(page: Page) -> str:
    """Wait for a live card; its approval_id."""
    page.wait_for_selector(".approval.pending .approval-actions button", timeout=15_000)
    return page.get_attribute(".approval.pending", "data-approval-id") or ""


def tool_messages(web: Web, count: int) -> list[str]:
    """What the model was told the tools returned, in its ``count``-th request."""
    body = web.upstream.wait_for_request(count, timeout=15).body
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def test_allow_once_runs_the_tool_and_the_card_says_who(app: Web, phone: str) -> None:
    before = len(app.upstream.requests)
    app.upstream.script(
        tool_call("terminal", ['{"command": "echo approved-$((6*7))"}'], content="Checking."),
        text("It printed approved-42."),
    )
    page = app.open("allow", token=phone)
    send(page, "run it")
    asked(page)
    assert "echo approved-$((6*7))" in (page.text_content(".approval.pending pre") or "")
    assert re.fullmatch(r"[01]:\d\d", page.text_content(".approval-countdown") or "")
    page.click(".approval-once")
    page.wait_for_selector(".approval-outcome")
    assert page.text_content(".approval-outcome") == "Allowed once by phone"
    settled(page, 4)
    assert [b["text"].strip() for b in bubbles(page)][3] == "It printed approved-42."
    assert "approved-42" in (page.text_content(".tool .tool-output") or "")  # it ran
    assert any("approved-42" in m for m in tool_messages(app, before + 2))
    assert page.locator(".approval button").count() == 0


def test_deny_never_runs_the_tool_and_the_model_is_told(app: Web, phone: str) -> None:
    before = len(app.upstream.requests)
    app.upstream.script(
        tool_call("terminal", ['{"command": "touch ran.txt"}'], content="Touching."),
        text("It was not approved."),
    )
    page = app.open("deny", token=phone)
    send(page, "touch it")
    asked(page)
    page.click(".approval-deny")
    page.wait_for_selector(".approval-outcome")
    assert page.text_content(".approval-outcome") == "Denied by phone"
    settled(page, 4)
    [told] = tool_messages(app, before + 2)
    assert "not approved (denied by phone)" in told
    assert not (Path(app.config).parent / "work" / "ran.txt").exists()


def test_two_devices_one_decision_the_other_shows_it_and_a_late_press_is_told(
    app: Web, phone: str
) -> None:
    app.upstream.script(
        tool_call("terminal", ['{"command": "echo both"}']),
        text("Done."),
    )
    first = app.open("two", token=phone)
    second = app.open("two")
    send(first, "go")
    asked(first)
    approval_id = asked(second)
    # The second device has not heard of the decision yet when its person presses Deny.
    second.evaluate("""() => { const s = window.__iris.view; const apply = s.apply.bind(s);
        window.queued = []; window.hold = true;
        s.apply = (f) => (window.hold ? window.queued.push(f) : apply(f)); }""")
    first.click(".approval-once")
    first.wait_for_selector(".approval-outcome")
    second.click(".approval-deny")
    second.wait_for_function(
        "() => window.queued.some((f) => f.type === 'error' && f.code === 'approval_decided')"
    )
    second.evaluate("""() => { window.hold = false;
        for (const f of window.queued) window.__iris.feed(f); }""")
    settled(first, 4)
    settled(second, 4)
    for page in (first, second):
        card = page.locator(f".approval[data-approval-id={approval_id}]")
        assert card.locator(".approval-outcome").text_content() == "Allowed once by phone"
        assert card.locator("button").count() == 0
    assert second.text_content(".approval-note") == "Already decided"
    assert first.locator(".approval-note").count() == 0
    assert [b["text"].strip() for b in bubbles(second)][3] == "Done."


def test_a_reload_while_pending_shows_the_card_again_with_its_countdown(app: Web) -> None:
    app.upstream.script(
        tool_call("terminal", ['{"command": "echo back"}']),
        text("Back."),
    )
    page = app.open("reload")
    send(page, "go")
    approval_id = asked(page)
    page.reload()
    wait_online(page)
    assert asked(page) == approval_id  # from the chat's log, still live
    countdown = page.text_content(".approval-countdown") or ""
    assert re.fullmatch(r"[01]:\d\d", countdown) and countdown != "0:00"
    page.click(".approval-once")
    page.wait_for_selector(".approval-outcome")
    assert page.text_content(".approval-outcome") == "Allowed once by token"
    settled(page, 4)
    assert "back" in (page.text_content(".tool .tool-output") or "")


def test_stop_while_pending_closes_the_card_on_every_page(app: Web) -> None:
    app.upstream.script(tool_call("terminal", ['{"command": "echo never"}']), text("unused"))
    first = app.open("stop")
    second = app.open("stop")
    send(first, "go")
    asked(first)
    asked(second)
    first.click("#stop")
    for page in (first, second):
        page.wait_for_selector(".approval-outcome", timeout=15_000)
        assert page.text_content(".approval-outcome") == "Cancelled (interrupt) — not run"
        assert page.locator(".approval button").count() == 0
        page.wait_for_function("() => !window.__iris.view.typing")
    outputs = first.locator(".tool-output").all_text_contents()
    assert all(output.strip() != "never" for output in outputs)  # the command never ran


def test_a_hidden_character_in_the_command_is_drawn_with_a_warning(app: Web) -> None:
    # Third pass, finding 4: a zero-width space (or a no-break space, a bidi override) before
    # "#" made "; touch X" look like a comment on the card.
    page = app.open("approval-hidden")
    spoof = "echo ok \u200b# ; \u202etouch X"
    feed(page, request(preview=spoof, args={"command": spoof}))
    card = page.locator(".bubble.approval .approval")
    command = card.locator("pre.approval-text").first.text_content() or ""
    assert command == "echo ok ⟨U+200B⟩# ; ⟨U+202E⟩touch X"
    warning = card.locator(".approval-warning").text_content() or ""
    assert warning.startswith("⚠ Holds 2 hidden or control characters")
    assert "\u200b" not in (card.text_content() or "")

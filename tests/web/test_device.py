"""The browser app as a device: reconnecting, several devices on a chat, settings kept per
device, chats, stop, the service worker, a phone's screen, a refused token. Real chromium, the
real ``iris serve``, the scripted upstream; a chat of its own per test."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.fakes.upstream import gated, hold, text

from .conftest import SAMPLER, TOKEN, Web, bubbles, send, settled, wait_online

pytestmark = pytest.mark.timeout(90)


def test_reconnecting_mid_reply_leaves_no_gap_or_duplicate(app: Web) -> None:
    chunks = [f"chunk {i:02d} of the reply; " for i in range(16)]
    app.upstream.script(gated(*chunks, after=4))
    page = app.open("reconnect")
    send(page, "go")
    assert app.upstream.gate_reached.wait(10)
    page.wait_for_function("() => window.__iris.view.bubbles.length === 2")
    # The phone loses its network: the socket drops while the model goes on.
    page.evaluate(
        "() => { window.__iris.connection.held = true; window.__iris.connection.drop(); }"
    )
    page.wait_for_function("() => !window.__iris.connection.connected")
    assert page.text_content("#status") != ""  # the status line says so
    app.upstream.release()
    assert app.upstream.finished.wait(10)
    page.evaluate(
        "() => { window.__iris.connection.held = false; window.__iris.connection.nudge(); }"
    )
    wait_online(page)
    settled(page, 2)
    shown = bubbles(page)
    assert [("user" in b["cls"]) for b in shown] == [True, False]
    assert shown[1]["text"].strip() == "".join(chunks).strip()
    assert page.text_content("#status") == ""


def test_two_pages_on_one_chat_stay_in_step_and_a_new_one_sees_the_chat(app: Web) -> None:
    app.upstream.script(text("Both ", "devices ", "see ", "this."))
    first = app.open("duo")
    second = app.open("duo")
    send(first, "hello from the phone")
    settled(first, 2)
    settled(second, 2)
    expected = ["hello from the phone", "Both devices see this."]
    assert [b["text"].strip() for b in bubbles(first)] == expected
    assert [b["text"].strip() for b in bubbles(second)] == expected
    late = app.open("duo")  # opened afterwards: the chat so far appears
    settled(late, 2)
    assert [b["text"].strip() for b in bubbles(late)] == expected


def test_settings_apply_live_and_survive_a_reload(app: Web) -> None:
    page = app.open("settings")
    page.focus("#open-settings")
    page.keyboard.press("Enter")  # keyboard-operable
    assert page.is_visible("#settings")
    page.uncheck("#set-streaming")
    page.eval_on_selector(
        "#set-speed",
        "e => { e.value = '0.6'; e.dispatchEvent(new Event('input', {bubbles: true})); }",
    )
    page.check("input[name=tool-detail][value=everything]")
    assert page.evaluate("window.__iris.view.smoothness") == 0.6  # applied at once
    page.click("#close-settings")
    page.reload()
    wait_online(page)
    assert page.evaluate("[window.__iris.view.smoothness, window.__iris.view.streaming]") == [
        0.6,
        False,
    ]
    page.click("#open-settings")
    assert not page.is_checked("#set-streaming")
    assert page.input_value("#set-speed") == "0.6"
    assert page.is_checked("input[name=tool-detail][value=everything]")
    page.click("#close-settings")
    # Streaming off: the server still streams (appends); the reply appears whole at its end.
    app.upstream.script(text("Shown ", "all ", "at ", "once."))
    page.evaluate(SAMPLER)
    send(page, "go")
    settled(page, 2)
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    final = bubbles(page)[1]["text"]
    assert final.strip() == "Shown all at once."
    assert {s["n"] for s in page.evaluate("window.samples")} == {len(final)}  # never partial


def test_at_a_phone_size_nothing_scrolls_sideways_and_targets_are_large(app: Web) -> None:
    wide = (
        "A link: https://example.com/" + "a" * 120 + "\n\n```text\n" + "x" * 300 + "\n```\n\n"
        "| a | b | c | d | e | f |\n|---|---|---|---|---|---|\n"
        + "| "
        + " | ".join(["long-cell-content"] * 6)
        + " |\n\n"
        + "word" * 80
    )
    app.upstream.script(text(wide))
    page = app.open("phone")
    send(page, "wide things")
    settled(page, 2)
    sizes = page.evaluate("""() => ({
        page: document.documentElement.scrollWidth, width: window.innerWidth,
        log: document.querySelector('#log').scrollWidth,
        logWidth: document.querySelector('#log').clientWidth,
        small: [...document.querySelectorAll('button, summary')].filter((e) => {
          const r = e.getBoundingClientRect();
          return r.width > 0 && (r.width < 44 || r.height < 44); }).map((e) => e.outerHTML)})""")
    assert sizes["page"] <= sizes["width"]
    assert sizes["log"] <= sizes["logWidth"]
    assert sizes["small"] == []
    page.set_viewport_size({"width": 360, "height": 740})  # the narrowest phone we promise
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    composer = page.locator("#composer").bounding_box()
    assert composer is not None and composer["y"] + composer["height"] <= 844


def test_pairing_without_a_link_and_a_refused_token(app: Web) -> None:
    page = app.context("pairing").new_page()
    page.goto(app.url)  # no token yet: the pairing screen, not a blank page
    page.wait_for_selector("#pair", state="visible")
    assert "iris devices add" in (page.text_content("#pair-message") or "")
    page.fill("#pair-token", "not-a-device")
    page.press("#pair-token", "Enter")
    page.wait_for_function("() => document.body.dataset.connection === 'unauthorized'")
    assert page.is_visible("#pair") and not page.is_visible("#log")
    assert "refused" in (page.text_content("#pair-message") or "")
    page.fill("#pair-token", TOKEN)  # the right one: connected, and kept for next time
    page.press("#pair-token", "Enter")
    wait_online(page)
    assert page.is_visible("#log") and not page.is_visible("#pair")
    page.reload()
    wait_online(page)


def test_stop_cancels_the_running_turn(app: Web) -> None:
    app.upstream.script(hold("A partial ", "answer"))
    page = app.open("stop")
    send(page, "go on forever")
    assert app.upstream.gate_reached.wait(10)
    page.wait_for_selector("#stop", state="visible")
    page.click("#stop")  # turn.cancel
    page.wait_for_selector("#stop", state="hidden")
    settled(page, 2)
    assert "A partial answer" in bubbles(page)[1]["text"]
    assert page.is_visible("#send")


def test_a_new_chat_and_the_list_of_chats(app: Web) -> None:
    app.upstream.script(text("first chat reply"))
    page = app.open("lister")
    send(page, "in the first chat")
    settled(page, 2)
    page.click("#open-chats")
    page.click("#new-chat")
    wait_online(page)
    chat_id = page.evaluate("window.__iris.view.chatId")
    assert chat_id.startswith("web-") and page.locator("#log .bubble").count() == 0
    page.click("#open-chats")  # the server's list (GET /iris/chats), or this browser's own
    page.get_by_role("button", name="in the first chat").click()
    wait_online(page)
    settled(page, 2)
    assert [b["text"].strip() for b in bubbles(page)] == ["in the first chat", "first chat reply"]


def test_the_service_worker_caches_only_the_shell(app: Web) -> None:
    context = app.browser.new_context()  # service workers allowed
    app.contexts.append(context)
    page = context.new_page()
    page.goto(f"{app.url}/#token={TOKEN}")
    wait_online(page)
    page.evaluate("() => navigator.serviceWorker.ready")
    cached: list[str] = page.evaluate("""async () => {
        const cache = await caches.open((await caches.keys())[0]);
        return (await cache.keys()).map((r) => new URL(r.url).pathname); }""")
    assert "/index.html" in cached and "/js/main.js" in cached
    assert not [path for path in cached if path.startswith(("/iris/", "/v1/", "/health"))]


def test_the_view_follows_the_reply_only_while_at_the_bottom(app: Web) -> None:
    paragraphs = [f"Paragraph {i} of a reply long enough to scroll.\n\n" for i in range(30)]
    app.upstream.script(gated(*paragraphs, after=15))
    page = app.open("scroll", viewport={"width": 390, "height": 500})
    send(page, "long one")
    assert app.upstream.gate_reached.wait(10)
    page.wait_for_function("() => window.__iris.view.bubbles[1]?.shown.includes('Paragraph 14')")
    page.wait_for_function(
        "() => { const b = window.__iris.view.bubbles[1]; return b.shown === b.text; }"
    )
    at_end = "() => { const l = document.querySelector('#log');"
    at_end += " return l.scrollTop + l.clientHeight >= l.scrollHeight - 40; }"
    assert page.evaluate(at_end)  # followed the reply so far
    page.evaluate("document.querySelector('#log').scrollTop = 0")  # the reader scrolls up
    page.wait_for_function("() => document.querySelector('#log').scrollTop === 0")
    # The page learns of the scroll from its scroll event, fired at the next rendering step:
    # two animation frames later it has run, as it has for a person's scroll before more text.
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    app.upstream.release()
    settled(page, 2)
    assert page.evaluate("document.querySelector('#log').scrollTop") == 0  # left where it was
    assert "Paragraph 29" in bubbles(page)[1]["text"]


def test_a_phone_paired_by_iris_devices_add_connects_and_is_told_when_revoked(app: Web) -> None:
    def iris(*args: str) -> str:
        ran = subprocess.run(
            [sys.executable, "-m", "iris.cli", "devices", *args, "--config", str(app.config)],
            env=app.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return ran.stdout

    link = re.search(r"(http://\S+/#token=\S+)", iris("add", "phone"))
    assert link is not None
    page = app.browser.new_context(viewport={"width": 390, "height": 844}).new_page()
    page.goto(link.group(1))  # what scanning the QR code opens
    wait_online(page)
    assert "#token=" not in page.url  # the token is kept by the app, not left in the address
    iris("revoke", "phone")
    page.wait_for_selector("#pair", state="visible", timeout=15_000)
    assert "revoked" in (page.text_content("#pair-message") or "")
    page.context.close()

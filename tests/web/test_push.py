"""Web Push in the browser: the page asks after the first reply (never on load) and registers
its subscription over the socket; the service worker shows a pushed notification and a tap
opens the app at that chat and message (chromium, the push delivered through DevTools'
``ServiceWorker.deliverPushMessage``).

Headless chromium reaches no real push service, so ``pushManager.subscribe`` is answered by the
page's own stand-in subscription (the browser API, not Iris's code); everything after it —
the frame, the server's store, ``iris devices push`` — is real.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page

from tests.fakes.upstream import text

from .conftest import TOKEN, Web, send, settled, wait_online

pytestmark = pytest.mark.timeout(90)

# Counts the permission questions; answers subscribe() with a fixed subscription.
WATCH = """
window.__asked = 0;
const ask = Notification.requestPermission.bind(Notification);
Notification.requestPermission = () => { window.__asked += 1; return ask(); };
PushManager.prototype.subscribe = async () => ({ toJSON: () => ({
  endpoint: "https://push.example/send/abcdef123456",
  keys: { p256dh: "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM", auth: "tBHItJI5svbpez7KI4CCXg" },
}) });
"""


def context(web: Web, chat: str, **options: Any) -> BrowserContext:
    made = web.browser.new_context(service_workers="allow", **options)
    made.add_init_script(f"localStorage.setItem('iris.chat', {chat!r});" + WATCH)
    web.contexts.append(made)
    return made


def opened(context: BrowserContext, web: Web) -> Page:
    page = context.new_page()
    page.goto(f"{web.url}/#token={TOKEN}")
    wait_online(page)
    page.evaluate("navigator.serviceWorker.ready.then(() => true)")
    return page


def devices(web: Web, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "iris.cli", "devices", *args, "--config", str(web.config)],
        capture_output=True,
        text=True,
        env=web.env,
        timeout=30,
        check=True,
    )
    return done.stdout


def test_the_page_asks_after_the_first_reply_and_registers_over_the_socket(web: Web) -> None:
    ctx = context(web, "asked")
    ctx.grant_permissions(["notifications"], origin=web.url)
    page = opened(ctx, web)
    assert page.evaluate("window.__asked") == 0  # never on load
    web.upstream.script(text("Hello there."))
    send(page, "hi")
    settled(page, 2)
    page.wait_for_function("() => localStorage.getItem('iris.push.chats') === '[\"asked\"]'")
    listed = devices(web, "push")
    assert "asked" in listed and "push.example" in listed and "123456" in listed
    assert "Removed" in devices(web, "unpush", "abcdef123456")
    assert "No push subscriptions" in devices(web, "push")


def test_a_browser_that_was_never_asked_is_asked_once_after_the_first_reply(web: Web) -> None:
    page = opened(context(web, "first"), web)
    assert page.evaluate("window.__asked") == 0
    for n, words in enumerate(("one", "two"), start=1):
        web.upstream.script(text(f"Reply {words}."))
        send(page, words)
        settled(page, 2 * n)
    page.wait_for_function("() => window.__asked === 1")
    assert page.evaluate("window.__asked") == 1  # asked once, not per reply


def registration_id(page: Page, context: BrowserContext) -> tuple[Any, str]:
    """A DevTools session on ``page`` and its service worker's registration, once the worker
    is activated and running (a push delivered before that finds no handler)."""
    cdp = context.new_cdp_session(page)
    found: list[str] = []
    cdp.on(
        "ServiceWorker.workerVersionUpdated",
        lambda event: found.extend(
            v["registrationId"]
            for v in event["versions"]
            if v["status"] == "activated" and v["runningStatus"] == "running"
        ),
    )
    cdp.send("ServiceWorker.enable")
    for _ in range(200):  # DevTools events arrive while Playwright waits
        if found:
            return cdp, found[0]
        page.wait_for_timeout(25)
    raise AssertionError("the service worker never ran")


def test_a_push_shows_a_notification_and_a_tap_opens_that_chat_and_message(web: Web) -> None:
    ctx = context(web, "elsewhere")
    ctx.grant_permissions(["notifications"], origin=web.url)
    page = opened(ctx, web)
    cdp, registration = registration_id(page, ctx)
    payload = {
        "title": "⏰ Scheduled run",
        "body": "Your inbox: 3 new messages",
        "chat_id": "jobs",
        "message_id": "m_42",
    }
    worker = ctx.service_workers[0]
    assert worker.evaluate("self.registration.active !== null")  # running, its handlers in place
    cdp.send(
        "ServiceWorker.deliverPushMessage",
        {"origin": web.url, "registrationId": registration, "data": json.dumps(payload)},
    )
    shown = (
        "self.registration.getNotifications().then((n) => n.map((x) => [x.title, x.body, x.data]))"
    )
    notes: list[Any] = []
    waited = time.monotonic() + 30  # a hang guard: under CI's load the push took over 5 s
    while not notes and time.monotonic() < waited:
        notes = worker.evaluate(shown)
        if not notes:
            page.wait_for_timeout(50)
    assert notes == [[payload["title"], payload["body"], {"chat_id": "jobs", "message_id": "m_42"}]]

    worker.evaluate(
        """self.registration.getNotifications().then(([notification]) =>
             self.dispatchEvent(new NotificationEvent("notificationclick", { notification })))"""
    )
    page.wait_for_function("() => localStorage.getItem('iris.chat') === 'jobs'")
    page.wait_for_function("() => window.__iris.connection && window.__iris.connection.connected")
    assert worker.evaluate("self.registration.getNotifications().then((n) => n.length)") == 0

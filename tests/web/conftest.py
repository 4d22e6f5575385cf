"""The browser app in a real browser: Debian's chromium driven by Playwright, against the real
``iris serve`` (a subprocess) on the scripted upstream. One server and one browser per module;
each test opens fresh browser contexts (their own localStorage) on a chat of its own."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.served import Served, free_port, write_config
from tests.fakes.upstream import FakeUpstream

CHROMIUM = "/usr/bin/chromium"
TOKEN = "web-device-token"

try:
    from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright
except ImportError:  # pragma: no cover - the skip below says why
    sync_playwright = None

if sync_playwright is None or shutil.which(CHROMIUM) is None:
    pytest.skip(
        "the browser tests need Playwright (pip install playwright) and Debian's chromium "
        f"at {CHROMIUM} (.ci/run installs both)",
        allow_module_level=True,
    )


class Web:
    """The running server, its upstream, and a way to open the app in a new browser context."""

    def __init__(
        self,
        url: str,
        upstream: FakeUpstream,
        browser: Browser,
        server: Served,
        config: Path,
        env: dict[str, str],
    ) -> None:
        self.url = url
        self.config = config  # the server's config: `iris devices` pairs phones with it
        self.env = env
        self.upstream = upstream
        self.browser = browser
        self.server = server
        self.contexts: list[BrowserContext] = []

    def context(self, chat: str, **options: Any) -> BrowserContext:
        """A browser context whose app is paired (token in the URL) and opens ``chat``."""
        options.setdefault("viewport", {"width": 390, "height": 844})
        context = self.browser.new_context(service_workers="block", **options)
        context.add_init_script(
            f"if (!localStorage.getItem('iris.chat')) localStorage.setItem('iris.chat', {chat!r});"
        )
        self.contexts.append(context)
        return context

    def open(
        self, chat: str, context: BrowserContext | None = None, token: str = TOKEN, **options: Any
    ) -> Page:
        page = (context or self.context(chat, **options)).new_page()
        page.goto(f"{self.url}/#token={token}")
        wait_online(page)
        return page


# The app's state as the tests read it. The page puts nothing on ``window``: main.js exports
# ``app``, and importing the module the page loaded (same URL, so the same instance) reaches
# it; the test then keeps it as ``window.__iris`` in its own page only.
HANDLE = """async () => {
  window.__iris = (await import(new URL('js/main.js', document.baseURI).href)).app;
}"""


def wait_online(page: Page) -> None:
    """Give the test its handle (``window.__iris``), then wait until the app is connected."""
    page.evaluate(HANDLE)  # awaited (wait_for_function would not await a promise)
    page.wait_for_function(
        "() => window.__iris.connection && window.__iris.connection.connected", timeout=10_000
    )


def send(page: Page, text: str) -> None:
    page.fill("#input", text)
    page.press("#input", "Enter")


def settled(page: Page, bubbles: int) -> None:
    """Wait until ``bubbles`` bubbles show, the turn is over and every reveal caught up."""
    page.wait_for_function(
        """(n) => { const s = window.__iris.view;
            return s.bubbles.length >= n && !s.typing && !s.revealing
              && document.querySelectorAll('#log .bubble').length >= n
              && !document.querySelector('#log .bubble.streaming')
              && document.querySelector('#stop').hidden; }""",
        arg=bubbles,
        timeout=15_000,
    )


BUBBLES = """() => [...document.querySelectorAll('#log .bubble')].map((b) => ({
    cls: b.className,
    text: b.querySelector('.md').textContent.replace(/\\u2589/g, ''),
    order: [...b.children].map((c) => c.className),
}))"""


def bubbles(page: Page) -> list[dict[str, Any]]:
    return page.evaluate(BUBBLES)


SAMPLER = """() => { window.samples = [];
  const step = () => {
    const b = document.querySelector('#log .bubble.assistant');
    if (b) window.samples.push({
      n: b.querySelector('.md').textContent.replace(/\\u2589/g, '').length,
      streaming: b.classList.contains('streaming'),
      cursor: !!b.querySelector('.cursor')});
    requestAnimationFrame(step);
  };
  requestAnimationFrame(step); }"""


@dataclass
class Running:
    """``iris serve`` with the iris app on the scripted upstream, as the browser tests use it."""

    url: str
    upstream: FakeUpstream
    server: Served
    config: Path
    env: dict[str, str]


@contextlib.contextmanager
def served_app(tmp: Path, approval: dict[str, Any] | None = None) -> Iterator[Running]:
    """Start ``iris serve`` (home and the terminal tool's folder under ``tmp``); stop it after.
    Tools run unasked unless ``approval`` (``tools.approval``) says otherwise."""
    (tmp / "work").mkdir(exist_ok=True)
    (tmp / "work" / "notes.txt").write_text("x")
    (tmp / "home").mkdir(exist_ok=True)
    with FakeUpstream() as upstream:
        port = free_port()
        config = write_config(
            tmp,
            upstream.base_url,
            port,
            platforms={"iris": {"enabled": True, "tokens": [TOKEN]}},
            streaming={"enabled": True},
            display={"platforms": {"iris": {"show_reasoning": True}}},
            tools={
                "terminal": {"cwd": str(tmp / "work")},
                "approval": approval or {"mode": "off"},
            },
        )
        env = {**os.environ, "HOME": str(tmp / "home")}
        server = Served(config, env=env)
        try:
            server.wait_for("Application startup complete")
            yield Running(f"http://127.0.0.1:{port}", upstream, server, config, env)
        finally:
            server.stop()


@contextlib.contextmanager
def web_on(tmp: Path, approval: dict[str, Any] | None = None) -> Iterator[Web]:
    """The served app and a browser for it (a module's ``web``)."""
    with served_app(tmp, approval) as running:
        assert sync_playwright is not None
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            yield Web(
                running.url,
                running.upstream,
                browser,
                running.server,
                running.config,
                running.env,
            )
            browser.close()


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    with web_on(tmp_path_factory.mktemp("web")) as running:
        yield running


@pytest.fixture
def app(web: Web) -> Iterator[Web]:
    """The module's server and browser; the test's contexts are closed after it."""
    yield web
    for context in web.contexts:
        context.close()
    web.contexts.clear()
    web.upstream.reset_gate()

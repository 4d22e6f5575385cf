"""The ``/status`` page in Debian's chromium against a real ``iris serve`` with metrics on: it
asks for the token, then draws the dashboard's series live from ``/metrics`` (uPlot vendored,
nothing fetched from elsewhere, no CSP violation)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openai import OpenAI
from playwright.sync_api import Page, sync_playwright  # noqa: I001 - after the skip in conftest

from tests.fakes.served import Served, serve
from tests.fakes.upstream import FakeUpstream, gated, text
from tests.observability.helpers import METRICS, TOKEN
from tests.web.conftest import CHROMIUM

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def served(tmp_path: Path, upstream: FakeUpstream) -> Iterator[tuple[Served, str]]:
    server, url = serve(tmp_path, upstream.base_url, server=METRICS)
    try:
        yield server, url
    finally:
        server.stop()


def chart(page: Page, name: str) -> dict[str, list[float | None]]:
    return page.evaluate("(id) => window.__status.charts[id] || {}", name)


def test_the_status_page_draws_the_series_live_behind_the_token(
    served: tuple[Served, str], upstream: FakeUpstream
) -> None:
    _, url = served
    page_answer = httpx.get(f"{url}/status")
    policy = page_answer.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert "connect-src 'self'" in policy and "unsafe" not in policy

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page()
            problems: list[str] = []
            requests: list[str] = []
            failed: list[tuple[int, str]] = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.on(
                "response", lambda r: failed.append((r.status, r.url)) if r.status >= 400 else None
            )

            # Without the token: the page asks for it.
            page.goto(f"{url}/status")
            page.wait_for_selector("#login:not([hidden])")
            assert "token" in (page.text_content("#state") or "")
            page.fill("#token", TOKEN)
            page.click("#login button")
            page.wait_for_function("() => window.__status.scrapes >= 2", timeout=15_000)

            # A turn held open upstream shows as one running API turn, then its tokens.
            upstream.script(gated("a ", "b", after=1))
            with OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as client:
                stream = client.chat.completions.create(
                    model="fake-model", messages=[{"role": "user", "content": "q"}], stream=True
                )
                chunks = iter(stream)
                next(chunks)
                page.wait_for_function(
                    "() => (window.__status.charts.running?.api || []).includes(1)",
                    timeout=15_000,
                )
                upstream.release()
                assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            upstream.script(text("more"))
            with OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as client:
                client.chat.completions.create(
                    model="fake-model", messages=[{"role": "user", "content": "q"}]
                )
            page.wait_for_function(
                "() => (window.__status.charts.tps?.all || []).some((v) => v > 0)"
                " && (window.__status.charts.ttft?.['fake-model'] || []).some((v) => v > 0)",
                timeout=15_000,
            )
            running = chart(page, "running")["api"]
            assert running[-1] == 0 and 1 in running
            # Five charts drawn, each a canvas of uPlot's.
            assert page.locator("#charts .uplot canvas").count() >= 5
            rows = page.locator("#now td").all_text_contents()
            assert "turns started" in rows and "turns complete" in rows
            assert page.evaluate("location.hash") == ""  # no token left in the address bar
            page.goto(f"{url}/status#token={TOKEN}")  # a bookmark with the token works too
            page.wait_for_function("() => window.__status.scrapes >= 1", timeout=15_000)
            assert page.locator("#login").is_hidden()
        finally:
            browser.close()
    # The only refusal: the first scrape, before the token was given.
    assert failed == [(401, f"{url}/metrics")], failed
    assert [p for p in problems if "Failed to load resource" not in p] == [], problems
    assert all(r.startswith(url) for r in requests), requests

"""The browser app as a user on a phone sees it: real chromium, the real ``iris serve``, the
scripted upstream. Each test uses a chat of its own on the module's one server."""

from __future__ import annotations

from typing import Any

import pytest

from iris.app.core.mdstream import MarkdownSplitter
from iris.app.core.reveal import Reveal
from tests.fakes.upstream import gated, hold, reasoning, text, tool_call

from .conftest import TOKEN, Web, send, settled, wait_online

pytestmark = pytest.mark.timeout(90)

BUBBLES = """() => [...document.querySelectorAll('#log .bubble')].map((b) => ({
    cls: b.className,
    text: b.querySelector('.md').textContent.replace(/\\u2589/g, ''),
    order: [...b.children].map((c) => c.className),
}))"""


def bubbles(page: Any) -> list[dict[str, Any]]:
    return page.evaluate(BUBBLES)


def test_a_tool_turn_renders_in_order_under_strict_headers(app: Web) -> None:
    """Doc 05 §5.6: user, commentary (dimmed) with its tool card, then the answer with its
    reasoning above it and the model/tokens footer; one announcement at start and end."""
    app.upstream.script(
        tool_call("terminal", ['{"command": "ls"}'], content="Let me look."),
        reasoning(["The user wants ", "a list."], ["There is ", "**one** file."]),
    )
    page = app.context("tool-turn").new_page()
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    page.on("pageerror", lambda error: console.append(str(error)))
    answer = page.goto(f"{app.url}/#token={TOKEN}")
    assert answer is not None
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert "token" not in page.url  # the pairing token left the address bar
    wait_online(page)
    page.evaluate("""() => { window.announced = []; new MutationObserver(() => {
        const t = document.querySelector('#announce').textContent;
        if (t) window.announced.push(t);
      }).observe(document.querySelector('#announce'), {childList: true, characterData: true,
        subtree: true}); }""")
    send(page, "what is here?")
    settled(page, 3)
    user, commentary, reply = bubbles(page)
    assert "user" in user["cls"] and user["text"] == "what is here?"
    assert "commentary" in commentary["cls"] and commentary["text"].strip() == "Let me look."
    card = page.locator(".bubble.commentary .tool")
    assert card.locator(".tool-name").text_content() == "terminal"
    assert "✓" in (card.locator(".tool-status").text_content() or "")
    assert reply["text"].strip() == "There is one file."
    assert page.locator(".bubble.message.assistant strong").text_content() == "one"
    assert reply["order"][:2] == ["reasoning", "md"]
    assert page.locator(".reasoning-body").text_content() == "The user wants a list."
    assert (
        page.locator(".bubble.message.assistant .meta").text_content() == "fake-model · 10 tokens"
    )
    page.wait_for_function(
        "() => document.querySelector('#announce').textContent.includes('finished')"
    )
    assert page.evaluate("window.announced") == ["Iris is replying", "Iris finished replying"]
    assert page.get_attribute("#log", "role") == "log"
    assert page.get_attribute("#log", "aria-live") == "off"  # never per token
    # No script error, no Content-Security-Policy violation (Playwright's own note aside).
    assert [line for line in console if "blocked by Playwright" not in line] == []
    # Tool detail, applied live: Everything opens the card, Nothing hides it.
    assert card.get_attribute("open") is None  # Truncated: one line, collapsed
    page.click("#open-settings")
    page.check("input[name=tool-detail][value=everything]")
    assert page.locator(".bubble.commentary .tool").get_attribute("open") == ""
    page.check("input[name=tool-detail][value=nothing]")
    assert page.locator(".bubble.commentary .tool").count() == 0


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


def test_the_reveal_is_gradual_and_catches_up(app: Web) -> None:
    # 128 characters: less than 2 s of reveal at 0.8 s (75/s), so no catch-up jump may fire.
    words = [f"word{i:02d} " for i in range(16)]
    full = "".join(words).strip()
    app.upstream.script(text(*words, delay=0.01))
    context = app.context("reveal")
    context.add_init_script("localStorage.setItem('iris.settings', '{\"smoothness\": 0.8}')")
    page = app.open("reveal", context)
    page.evaluate(SAMPLER)
    send(page, "go")
    settled(page, 2)
    samples: list[dict[str, Any]] = page.evaluate("window.samples")
    lengths = [s["n"] for s in samples]
    assert lengths == sorted(lengths)  # never backwards
    partial = {n for n in lengths if 0 < n < len(full)}
    assert len(partial) >= 8  # a typewriter, not a few jumps
    assert bubbles(page)[1]["text"].strip() == full
    # The bubble streams (with its cursor) until the reveal caught up, and only then stops.
    assert all(s["streaming"] and s["cursor"] for s in samples if s["n"] < len(full))
    assert page.locator("#log .cursor").count() == 0
    assert page.evaluate("window.__iris.store.reveals.size") == 0


MARKER = """() => { window.blocks = []; window.inside = 0; window.tailChanges = 0;
  const log = document.querySelector('#log');
  new MutationObserver((records) => {
    for (const r of records) {
      const target = r.target.nodeType === 1 ? r.target : r.target.parentElement;
      if (target.closest('.block')) window.inside++;
      if (target.closest('.tail') || target.classList.contains('tail')) window.tailChanges++;
      for (const node of r.addedNodes) {
        if (node.nodeType === 1 && node.classList.contains('block')) {
          node.irisMark = window.blocks.length; window.blocks.push(node);
        }
      }
      for (const node of r.removedNodes) {
        if (node.nodeType === 1 && node.classList.contains('block')) window.inside++;
      }
    }
  }).observe(log, {subtree: true, childList: true, characterData: true, attributes: true});
}"""


def test_settled_blocks_keep_their_nodes_while_the_tail_streams(app: Web) -> None:
    paragraphs = [f"Paragraph {i} has **bold** and `code` in it.\n\n" for i in range(10)]
    chunks = [p[k : k + 12] for p in paragraphs for k in range(0, len(p), 12)]
    app.upstream.script(text(*chunks, delay=0.01))
    page = app.open("identity")
    page.evaluate(MARKER)
    send(page, "go")
    settled(page, 2)
    result = page.evaluate("""() => ({
        count: window.blocks.length, inside: window.inside, tail: window.tailChanges,
        same: window.blocks.every((b, i) => b.isConnected && b.irisMark === i
          && document.querySelectorAll('#log .block')[i] === b)})""")
    assert result["count"] >= 8  # blocks settled one by one while the reply streamed
    assert result["same"]  # the very same node objects, still in the page, in order
    assert result["inside"] == 0  # nothing inside a settled block was ever touched
    assert result["tail"] > result["count"]  # the tail did the moving


def test_reconnecting_mid_reply_leaves_no_gap_or_duplicate(app: Web) -> None:
    chunks = [f"chunk {i:02d} of the reply; " for i in range(16)]
    app.upstream.script(gated(*chunks, after=4))
    page = app.open("reconnect")
    send(page, "go")
    assert app.upstream.gate_reached.wait(10)
    page.wait_for_function("() => window.__iris.store.bubbles.length === 2")
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
    assert page.evaluate("window.__iris.store.smoothness") == 0.6  # applied at once
    page.click("#close-settings")
    page.reload()
    wait_online(page)
    assert page.evaluate("[window.__iris.store.smoothness, window.__iris.store.streaming]") == [
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
    final = bubbles(page)[1]["text"]
    assert final.strip() == "Shown all at once."
    assert {s["n"] for s in page.evaluate("window.samples")} == {len(final)}  # never partial


XSS_REPLY = (
    "<script>window.__xss = 'script'</script>\n\n"
    "<img src=x onerror=\"window.__xss = 'img'\">\n\n"
    "[click me](javascript:window.__xss='link') and [data](data:text/html,<script>1</script>)\n\n"
    "[entity](jav&#x61;script:window.__xss='entity') <svg onload=\"window.__xss='svg'\">\n\n"
    "![pic](javascript:window.__xss='image') `<b onmouseover=x>`\n\n"
    "<iframe src=\"javascript:window.__xss='frame'\"></iframe> **done**"
)


def test_xss_payloads_through_the_real_server_do_not_run(app: Web) -> None:
    app.upstream.script(
        tool_call(
            "terminal",
            ['{"command": "echo \'<img src=x onerror=window.__xss=1>\'"}'],
            content="<img src=y onerror=\"window.__xss='commentary'\">",
        ),
        reasoning(["<script>window.__xss='reasoning'</script>"], [XSS_REPLY]),
    )
    page = app.open("xss")
    send(page, "<img src=z onerror=\"window.__xss='user'\">")
    settled(page, 3)
    for link in page.locator("#log a").all():
        link.click(modifiers=["Alt"], no_wait_after=True)  # would run a javascript: href
    found = page.evaluate("""() => ({
        xss: window.__xss ?? null,
        active: document.querySelectorAll('#log script, #log iframe, #log svg, #log [onerror],'
          + ' #log [onload], #log [onmouseover]').length,
        hrefs: [...document.querySelectorAll('#log a, #log img')].map(
          (e) => e.getAttribute('href') ?? e.getAttribute('src')),
        text: document.querySelector('#log').textContent})""")
    assert found["xss"] is None
    assert found["active"] == 0
    assert not [h for h in found["hrefs"] if h and h.lower().startswith(("javascript", "data"))]
    assert "<script>window.__xss = 'script'</script>" in found["text"]  # shown as text
    assert page.url.startswith(app.url)


ARTIFACT = """Here is the page:

```html
<p id="out">waiting</p>
<script>
  const seen = [];
  try { seen.push(parent.document.title); } catch (e) { seen.push("parent-blocked"); }
  try { localStorage.getItem("iris.token"); seen.push("storage-open"); }
  catch (e) { seen.push("storage-blocked"); }
  try { top.location.href = "https://example.com/"; } catch (e) { seen.push("nav-blocked"); }
  document.getElementById("out").textContent = "ran " + seen.join(" ");
</script>
```
"""


def test_the_html_artifact_runs_sandboxed_or_downloads(app: Web) -> None:
    app.upstream.script(text(*[ARTIFACT[k : k + 40] for k in range(0, len(ARTIFACT), 40)]))
    page = app.open("artifact")
    page.evaluate("""() => { window.early = 0; const step = () => {
        if (document.querySelector('.bubble.streaming .artifact')) window.early++;
        requestAnimationFrame(step); }; requestAnimationFrame(step); }""")
    send(page, "make a page")
    settled(page, 2)
    assert page.evaluate("window.early") == 0  # the card waits for the reveal to finish
    card = page.locator(".artifact")
    with page.expect_download() as download:
        card.locator(".artifact-save").click()
    assert download.value.suggested_filename == "iris-page.html"
    card.locator(".artifact-open").click()
    frame = page.locator(".artifact iframe")
    assert frame.get_attribute("sandbox") == "allow-scripts"
    out = page.frame_locator(".artifact iframe").locator("#out", has_text="ran ")
    out.wait_for()
    ran = out.text_content() or ""
    assert ran.startswith("ran ")
    assert "parent-blocked" in ran and "storage-blocked" in ran
    assert page.url.startswith(app.url)  # the app was not navigated away
    assert page.evaluate("document.querySelector('#log .artifact') !== null")


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


def test_a_wrong_token_shows_the_pairing_screen(app: Web) -> None:
    page = app.context("wrong").new_page()
    page.goto(f"{app.url}/#token=not-a-device")
    page.wait_for_selector("#pair", state="visible")
    assert "refused" in (page.text_content("#pair-message") or "")
    assert not page.is_visible("#log")


def test_the_core_rules_are_the_terminal_apps(app: Web) -> None:
    """The browser's reveal and splitter give what src/iris/app/core gives for the same input."""
    page = app.open("core")
    chunks = [
        "# Title\n\nSome ",
        "text here\n",
        "\n1. one\n",
        "2. two\n\n```py\nx = 1\n",
        "```\n",
        "\nend",
    ]
    js = page.evaluate(
        """async (chunks) => {
          const { MarkdownSplitter } = await import('/js/mdstream.js');
          const { md } = await import('/js/markdown.js');
          const { Reveal } = await import('/js/reveal.js');
          const splitter = new MarkdownSplitter(md);
          const settled = chunks.map((c) => splitter.append(c).map((b) => b.source));
          const reveal = new Reveal(0.4, 0);
          const shown = [];
          let target = '';
          for (let i = 1; i <= 40; i++) {
            if (i % 4 === 1) { target += 'abcdefghij'.repeat(i % 3 + 1); reveal.push(target, i / 20); }
            reveal.tick(i / 20);
            shown.push(reveal.shown);
          }
          reveal.push(target + 'z'.repeat(2000), 2.05);
          return { settled, tail: splitter.tail, shown, jumps: reveal.jumps };
        }""",
        chunks,
    )
    splitter = MarkdownSplitter()
    settled_py = [[b.source for b in splitter.append(c)] for c in chunks]
    assert js["settled"] == settled_py and js["tail"] == splitter.tail
    reveal = Reveal(0.4, 0)
    shown: list[int] = []
    target = ""
    for i in range(1, 41):
        if i % 4 == 1:
            target += "abcdefghij" * (i % 3 + 1)
            reveal.push(target, i / 20)
        reveal.tick(i / 20)
        shown.append(reveal.shown)
    reveal.push(target + "z" * 2000, 2.05)
    assert js["shown"] == shown
    assert js["jumps"] == reveal.jumps == 1  # a dump far past the stream's pace jumps


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
    chat_id = page.evaluate("window.__iris.store.chatId")
    assert chat_id.startswith("web-") and page.locator("#log .bubble").count() == 0
    page.click("#open-chats")  # the server has no chat list yet (404): this browser's own
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


HEALED = {
    "a **bold": "a **bold**",
    "a `co": "a `co`",
    "x ~~gone": "x ~~gone~~",
    "see [docs](https://exa": "see docs",
    "see [do": "see do",
    "* item **b": "* item **b**",
    "ok **": "ok ",
    "```py\nx = **": "```py\nx = **",  # inside an open fence nothing is healed
    "snake_case word": "snake_case word",
    "2*3 is": "2*3 is",  # not emphasis
    "so *it": "so *it*",
    "done **b**": "done **b**",
}


def test_the_unfinished_tail_is_healed_for_display(app: Web) -> None:
    page = app.open("heal")
    healed = page.evaluate(
        """async (cases) => { const { heal } = await import('/js/heal.js');
           return Object.fromEntries(cases.map((c) => [c, heal(c)])); }""",
        list(HEALED),
    )
    assert healed == HEALED


def test_the_view_follows_the_reply_only_while_at_the_bottom(app: Web) -> None:
    paragraphs = [f"Paragraph {i} of a reply long enough to scroll.\n\n" for i in range(30)]
    app.upstream.script(gated(*paragraphs, after=15))
    page = app.open("scroll", viewport={"width": 390, "height": 500})
    send(page, "long one")
    assert app.upstream.gate_reached.wait(10)
    page.wait_for_function("() => window.__iris.store.bubbles[1]?.shown.includes('Paragraph 14')")
    page.wait_for_function(
        "() => { const b = window.__iris.store.bubbles[1]; return b.shown === b.text; }"
    )
    at_end = "() => { const l = document.querySelector('#log');"
    at_end += " return l.scrollTop + l.clientHeight >= l.scrollHeight - 40; }"
    assert page.evaluate(at_end)  # followed the reply so far
    page.evaluate("document.querySelector('#log').scrollTop = 0")  # the reader scrolls up
    page.wait_for_function("() => document.querySelector('#log').scrollTop === 0")
    app.upstream.release()
    settled(page, 2)
    assert page.evaluate("document.querySelector('#log').scrollTop") == 0  # left where it was
    assert "Paragraph 29" in bubbles(page)[1]["text"]

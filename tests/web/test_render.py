"""How the browser app renders a reply: in order, revealed gradually, settled blocks drawn
once, healed, sanitized, the artifact sandboxed, by the same rules as the terminal app's core.
Real chromium, the real ``iris serve``, the scripted upstream; a chat of its own per test."""

from __future__ import annotations

from typing import Any

import pytest
import regex

from iris.app.core.mdstream import MarkdownSplitter
from iris.app.core.reveal import Reveal
from iris.app.core.view import ChatView
from tests.fakes.upstream import reasoning, text, tool_call

from .conftest import SAMPLER, TOKEN, Web, bubbles, send, settled, wait_online

pytestmark = pytest.mark.timeout(90)


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


def test_the_page_puts_nothing_of_its_own_on_window(app: Web) -> None:
    """No test hook in the app as served: its state is main.js's export, not a global."""
    page = app.context("globals").new_page()
    page.goto(f"{app.url}/#token={TOKEN}")
    page.wait_for_function("() => document.body.dataset.connection === 'online'")
    own: list[str] = page.evaluate("""() => {
        const blank = document.createElement('iframe');  // a window with no script of ours
        document.body.append(blank);
        const standard = new Set(Object.getOwnPropertyNames(blank.contentWindow));
        blank.remove();
        return Object.getOwnPropertyNames(window).filter((name) => !standard.has(name)); }""")
    assert own == []
    wait_online(page)  # the tests' handle: imported, then kept by the test itself
    assert page.evaluate("window.__iris.connection.connected") is True


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
    assert page.evaluate("window.__iris.view.reveals.size") == 0


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


def test_the_sandbox_page_opened_directly_gets_no_access_to_the_app(app: Web) -> None:
    """A site that opens /sandbox.html in a window of its own (and posts it a page) must not
    get a page running with the app's origin, whose localStorage holds the device token."""
    page = app.open("sandbox-direct")  # paired: the token is in this origin's storage
    sandbox = page.context.new_page()
    sandbox.goto(f"{app.url}/sandbox.html")
    assert sandbox.evaluate("self.origin") == "null"  # the CSP sandbox, wherever it is opened
    storage = "() => { try { return localStorage.length >= 0 ? 'open' : '' } catch (e) { return 'blocked' } }"
    assert sandbox.evaluate(storage) == "blocked"  # so no script there can read the token
    assert page.evaluate(storage) == "open"  # ... which the app itself keeps there


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


def _frames() -> list[dict[str, Any]]:
    """A turn as a device with appends sees it, with a dropped append and a replayed frame."""
    bodies: list[dict[str, Any]] = [
        {"type": "typing", "on": True},
        {"type": "message.start", "message_id": "m1", "role": "assistant"},
        {"type": "message.append", "message_id": "m1", "offset": 0, "text": "Let me "},
        {"type": "message.append", "message_id": "m1", "offset": 7, "text": "look."},
        {"type": "commentary", "message_id": "m1", "text": "Let me look."},
        {"type": "tool.start", "index": 1, "name": "terminal", "preview": "ls", "args": {}},
        {"type": "tool.progress", "index": 1, "name": "terminal", "note": "a.txt"},
        {
            "type": "tool.end",
            "index": 1,
            "name": "terminal",
            "ok": True,
            "duration": 0.4,
            "output_preview": "a.txt",
        },
        {"type": "message.start", "message_id": "m2", "role": "assistant"},
        {"type": "message.append", "message_id": "m2", "offset": 0, "text": "The repo "},
        {"type": "message.append", "message_id": "m2", "offset": 99, "text": "lost"},
        {"type": "message.update", "message_id": "m2", "text": "The repo has one file"},
        {
            "type": "message.stop",
            "message_id": "m2",
            "offset": 21,
            "text": ".",
            "reasoning": "think",
            "model": "fake-model",
            "tokens": 42,
        },
        {"type": "typing", "on": False},
        {"type": "message", "message_id": "u9", "role": "user", "text": "from the other phone"},
        {"type": "error", "code": "turn_active", "message": "a turn is running"},
    ]
    frames = [{**body, "chat_id": "c", "seq": n} for n, body in enumerate(bodies, start=1)]
    resynced = {
        "type": "sync",
        "chat_id": "c",
        "seq": 40,
        "messages": [
            {"message_id": "u1", "role": "user", "text": "hi"},
            {
                "message_id": "a1",
                "role": "assistant",
                "text": "**hello**",
                "reasoning": "r",
                "model": "fake-model",
                "tokens": 3,
            },
        ],
    }
    # A replayed stop changes nothing; a sync (the log no longer reaches back) replaces all.
    return [*frames, frames[12], resynced]


def test_the_view_model_is_the_terminal_apps(app: Web) -> None:
    """Frame for frame and tick for tick, the browser's view model (js/view.js) holds what
    src/iris/app/core/view.py holds: bubbles, revealed text, tools, resume requests."""
    frames = _frames()
    page = app.open("view-model")
    js = page.evaluate(
        """async (frames) => {
          const { ChatView } = await import('/js/view.js');
          let now = 0;
          const view = new ChatView(() => now, { smoothness: 0.4 });
          const views = [];
          for (const frame of frames) {
            view.apply(frame);
            now += 0.05;
            view.tick();
            views.push({ resync: view.takeResync(), typing: view.typing,
              bubbles: view.bubbles.map((b) => [b.messageId, b.role, b.kind, b.text, b.shown,
                b.streaming, b.reasoning, b.model, b.tokens,
                b.tools.map((t) => [t.index, t.name, t.ok, t.notes, t.outputPreview])]) });
          }
          return views;
        }""",
        frames,
    )
    clock = {"now": 0.0}
    view = ChatView(lambda: clock["now"], smoothness=0.4)
    views: list[dict[str, Any]] = []
    for frame in frames:
        view.apply(frame)
        clock["now"] += 0.05
        view.tick()
        views.append(
            {
                "resync": view.take_resync(),
                "typing": view.typing,
                "bubbles": [
                    [
                        b.message_id,
                        b.role,
                        b.kind,
                        b.text,
                        b.shown,
                        b.streaming,
                        b.reasoning,
                        b.model,
                        b.tokens,
                        [[t.index, t.name, t.ok, t.notes, t.output_preview] for t in b.tools],
                    ]
                    for b in view.bubbles
                ],
            }
        )
    assert js == views
    assert [v["resync"] for v in views].count(10) == 1  # the lost append asked for a resume


def test_the_reveal_never_cuts_a_grapheme(app: Web) -> None:
    full = "👨‍👩‍👧 e\u0301 🇫🇷 中文 😀 " * 8
    page = app.open("graphemes")
    prefixes: list[str] = page.evaluate(
        """async (full) => {
          const { Reveal } = await import('/js/reveal.js');
          const reveal = new Reveal(0.2, 0);
          reveal.push(full, 0);
          const seen = [];
          for (let i = 1; i <= 400 && !reveal.caughtUp; i++) {
            reveal.tick(i / 240);
            seen.push(reveal.text);
          }
          return seen;
        }""",
        full,
    )
    clusters = regex.findall(r"\X", full)
    ends = {len("".join(clusters[:k])) for k in range(len(clusters) + 1)}
    assert prefixes[-1] == full and len(set(prefixes)) > 10
    assert all(full.startswith(p) and len(p) in ends for p in prefixes)

"""The browser app under a long streamed reply: long tasks, frame pacing, settled-block
mutations and heap, in headless chromium.

Starts ``iris serve`` (a subprocess, the iris socket on, no model needed), opens the app in
Debian's chromium through Playwright, and feeds a reply of ``--chars`` characters of Markdown
(paragraphs, lists, code fences) into the page as ``message.append`` frames of ``--chunk``
characters at ``--rate`` updates per second — the gateway's default cadence — through the same
path the socket uses (``feed`` of the ``app`` main.js exports), with Streaming on at the default
speed. Prints:

- long tasks (> 50 ms, PerformanceObserver ``longtask``) after load, while the reply streams;
- frame intervals (requestAnimationFrame) while it streams: p50, p95, max;
- DOM mutations outside the tail block (a MutationObserver on the log: anything changed inside
  a settled ``.block``, or a settled block removed) — the incremental renderer's promise is 0;
- the script heap (after a forced GC) before and after, and its growth per character.

Targets: no long task, p95 frame <= 20 ms, zero mutations of settled blocks, heap growth linear
in the text (compare ``--chars 5000`` with the default).

    python bench/web_render.py [--chars 20000] [--chunk 24] [--rate 40]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.served import Served, free_port, write_config  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
TOKEN = "bench-device-token-0123"

INSTRUMENT = """() => {
  window.bench = { long: [], frames: [], inside: 0, tail: 0, feeding: false };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if (window.bench.feeding) window.bench.long.push(e.duration);
  }).observe({ type: 'longtask' });
  let last = null;
  const frame = (t) => {
    if (window.bench.feeding && last !== null) window.bench.frames.push(t - last);
    last = t;
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
  new MutationObserver((records) => {
    for (const r of records) {
      const target = r.target.nodeType === 1 ? r.target : r.target.parentElement;
      if (target.closest('.block')) window.bench.inside++;
      else window.bench.tail++;
      for (const n of r.removedNodes) if (n.nodeType === 1 && n.classList.contains('block')) window.bench.inside++;
    }
  }).observe(document.querySelector('#log'), { subtree: true, childList: true, characterData: true, attributes: true });
}"""

# main.js exports the app's state (the page puts nothing on window); keep it as window.__iris.
HANDLE = "async () => { window.__iris = (await import('/js/main.js')).app; }"

FEED = """async ({ text, chunk, rate }) => {
  const iris = window.__iris;
  let seq = 1_000_000;
  const id = 'bench-reply';
  window.bench.feeding = true;
  iris.feed({ type: 'typing', on: true, seq: ++seq });
  iris.feed({ type: 'message.start', message_id: id, role: 'assistant', seq: ++seq });
  let offset = 0;
  await new Promise((done) => {
    const timer = setInterval(() => {
      const part = text.slice(offset, offset + chunk);
      iris.feed({ type: 'message.append', message_id: id, offset, text: part, seq: ++seq });
      offset += part.length;
      if (offset >= text.length) { clearInterval(timer); done(); }
    }, 1000 / rate);
  });
  iris.feed({ type: 'message.stop', message_id: id, offset, text: '', model: 'bench', tokens: 1, seq: ++seq });
  iris.feed({ type: 'typing', on: false, seq: ++seq });
  await new Promise((done) => {
    const wait = () => (iris.view.revealing ? setTimeout(wait, 50) : done());
    wait();
  });
  window.bench.feeding = false;
  const shown = document.querySelector('#log .bubble.assistant .md').textContent;
  return { blocks: document.querySelectorAll('#log .block').length, shownChars: shown.length };
}"""


def reply_text(chars: int) -> str:
    """Deterministic Markdown of about ``chars`` characters, as a model writes it."""
    parts: list[str] = []
    n = 0
    while sum(map(len, parts)) < chars:
        n += 1
        parts.append(f"## Section {n}\n\n")
        parts.append(
            f"Paragraph {n} explains **one thing** with `inline code`, a [link](https://example.com/{n})"
            " and enough words to wrap on a phone screen, like a real answer would.\n\n"
        )
        parts.append(f"- point {n}.1 with *emphasis*\n- point {n}.2\n- point {n}.3\n\n")
        if n % 3 == 0:
            parts.append(f"```python\ndef step_{n}(x):\n    return x * {n}\n```\n\n")
    return "".join(parts)[:chars]


def heap(session: Any) -> int:
    session.send("HeapProfiler.collectGarbage")
    return int(session.send("Runtime.getHeapUsage")["usedSize"])


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description="The browser app under a long streamed reply.")
    parser.add_argument("--chars", type=int, default=20_000)
    parser.add_argument("--chunk", type=int, default=24)
    parser.add_argument("--rate", type=float, default=40.0)
    args = parser.parse_args()
    if shutil.which(CHROMIUM) is None:
        sys.exit(f"needs Debian's chromium at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        port = free_port()
        config = write_config(
            tmp,
            "http://127.0.0.1:9/v1",
            port,
            platforms={"iris": {"enabled": True, "tokens": [TOKEN]}},
        )
        server = Served(config, env={**os.environ, "HOME": str(tmp)})
        try:
            server.wait_for("Application startup complete")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
                context = browser.new_context(
                    viewport={"width": 390, "height": 844}, service_workers="block"
                )
                page = context.new_page()
                page.goto(f"http://127.0.0.1:{port}/#token={TOKEN}")
                page.evaluate(HANDLE)
                page.wait_for_function("() => window.__iris.connection?.connected")
                session = context.new_cdp_session(page)
                before = heap(session)
                page.evaluate(INSTRUMENT)
                text = reply_text(args.chars)
                started = time.monotonic()
                result = page.evaluate(FEED, {"text": text, "chunk": args.chunk, "rate": args.rate})
                took = time.monotonic() - started
                bench = page.evaluate("window.bench")
                after = heap(session)
                browser.close()
        finally:
            server.stop()
    frames: list[float] = bench["frames"]
    long_tasks: list[float] = bench["long"]
    updates = -(-len(text) // args.chunk)
    print(f"reply: {len(text)} characters in {updates} appends of {args.chunk} at {args.rate:g}/s")
    print(f"streamed and revealed in {took:.1f} s; {result['blocks']} settled blocks")
    print(
        f"long tasks (> 50 ms) while streaming: {len(long_tasks)}"
        + (f" (max {max(long_tasks):.0f} ms)" if long_tasks else "")
    )
    print(
        f"frame interval: p50 {statistics.median(frames):.1f} ms, "
        f"p95 {percentile(frames, 95):.1f} ms, max {max(frames):.1f} ms ({len(frames)} frames)"
    )
    print(f"DOM mutations outside the tail block: {bench['inside']} (tail: {bench['tail']})")
    print(
        f"script heap: {before / 1e6:.2f} MB before, {after / 1e6:.2f} MB after "
        f"({(after - before) / len(text):.0f} bytes per character of reply)"
    )


if __name__ == "__main__":
    main()

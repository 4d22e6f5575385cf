"""Rendering a streamed 20 000-character Markdown reply: incremental versus full re-parse.

The reply (headings, prose, code, lists, tables) arrives as snapshot extensions of 24
characters, like the gateway's ``message.update`` frames. Printed:

* characters handed to the parser and total CPU: full re-parse of every snapshot versus the
  incremental splitter (target: incremental ≤ 1/20 of full);
* the worst single tick of the incremental path (target: < 8 ms);
* the app's CPU per step (frame applied, revealed, painted) for the first 100 versus the last
  100 deltas (target: last within 2× of first — a frame must not cost more as the reply grows).

Run: ``python bench/render.py``. Not part of the test run.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from iris.app.app import IrisApp
from iris.app.core.breaks import hard_breaks
from iris.app.core.mdstream import MarkdownFeed, MarkdownSplitter, make_parser
from iris.app.settings import Settings

STEP = 24
SIZE = 20_000


def reply(size: int = SIZE) -> str:
    parts: list[str] = []
    n = 0
    while sum(map(len, parts)) < size:
        n += 1
        parts.append(
            f"## Section {n}\n\n"
            f"This paragraph explains step {n} with **bold**, `inline code` and a "
            f"[link](https://example.com/{n}). It runs long enough to wrap on a terminal.\n"
            "A second line that stays in the same paragraph.\n\n"
            f"```python\ndef step_{n}(items):\n    total = 0\n    for item in items:\n"
            f"        total += item * {n}\n    return total\n```\n\n"
            f"- first point of {n}\n- second point, with `code`\n  - a nested point\n"
            "- third point\n\n"
            f"1. do this\n2. then that\n3. finally {n}\n\n"
            "| name | value | note |\n| --- | ---: | --- |\n"
            f"| alpha | {n} | fine |\n| beta | {n * 2} | also fine |\n\n"
        )
    return "".join(parts)[:size]


def snapshots(text: str) -> list[str]:
    return [text[:end] for end in range(STEP, len(text) + STEP, STEP)]


def bench_full(steps: list[str]) -> tuple[int, float, float]:
    md = make_parser()
    chars, worst = 0, 0.0
    start = time.process_time()
    for snapshot in steps:
        t = time.perf_counter()
        md.parse(snapshot)
        worst = max(worst, time.perf_counter() - t)
        chars += len(snapshot)
    return chars, time.process_time() - start, worst


def bench_incremental(steps: list[str]) -> tuple[int, float, float]:
    splitter = MarkdownSplitter()
    previous, worst = "", 0.0
    start = time.process_time()
    for snapshot in steps:
        t = time.perf_counter()
        splitter.append(snapshot[len(previous) :])
        worst = max(worst, time.perf_counter() - t)
        previous = snapshot
    return splitter.parsed_chars, time.process_time() - start, worst


def bench_feed(steps: list[str]) -> tuple[int, float, float]:
    """The app's whole per-tick core path: hard breaks + splitter."""
    feed, worst = MarkdownFeed(), 0.0
    start = time.process_time()
    for snapshot in steps:
        t = time.perf_counter()
        feed.show(snapshot)
        worst = max(worst, time.perf_counter() - t)
    assert feed.splitter.source == hard_breaks(steps[-1])
    return feed.splitter.parsed_chars, time.process_time() - start, worst


class SteppedClock:
    """Each step moves time on a full second, so every delta is revealed by the next tick."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def bench_app(steps: list[str], home: Path) -> list[float]:
    """CPU per step in the real app: apply the frame, tick, wait until the tail is painted."""
    clock = SteppedClock()
    app = IrisApp(
        Settings(url="ws://127.0.0.1:9/iris/ws", smoothness=0.2),
        clock=clock,
        settings_file=home / "app.json",
        retry_min=60,
    )
    costs: list[float] = []
    async with app.run_test(size=(100, 40)) as pilot:
        # The app has been open a while before a reply streams: let start-up work finish.
        for worker in [w for w in app.workers if w.name == "warm-up"]:
            await worker.wait()
        app.store.apply({"type": "message.start", "seq": 1, "message_id": "m1"})
        for seq, snapshot in enumerate(steps, start=2):
            start = time.process_time()
            clock.now += 1.0
            app.store.apply(
                {"type": "message.update", "seq": seq, "message_id": "m1", "text": snapshot}
            )
            app._tick()
            widget = app._widgets["m1"]
            while not (widget.is_mounted and widget.body.idle):
                await pilot.pause()
            await pilot.pause()  # let the layout and paint of this step happen
            costs.append(time.process_time() - start)
    return costs


def main() -> int:
    text = reply()
    steps = snapshots(text)
    print(f"reply: {len(text)} characters in {len(steps)} snapshots of {STEP}")
    with tempfile.TemporaryDirectory() as home:
        costs = asyncio.run(bench_app(steps, Path(home)))
    full_chars, full_cpu, full_worst = bench_full(steps)
    inc_chars, inc_cpu, inc_worst = bench_incremental(steps)
    feed_chars, feed_cpu, feed_worst = bench_feed(steps)
    print(
        f"full re-parse : {full_chars / 1e6:6.3f} M chars parsed  {full_cpu:7.3f} s CPU  "
        f"worst tick {full_worst * 1e3:6.2f} ms"
    )
    print(
        f"incremental   : {inc_chars / 1e6:6.3f} M chars parsed  {inc_cpu:7.3f} s CPU  "
        f"worst tick {inc_worst * 1e3:6.2f} ms"
    )
    print(
        f"  + hard breaks: {feed_chars / 1e6:6.3f} M chars parsed  {feed_cpu:7.3f} s CPU  "
        f"worst tick {feed_worst * 1e3:6.2f} ms"
    )
    ratio = full_cpu / inc_cpu
    print(f"target incremental <= 1/20 of full: 1/{ratio:.0f}  {'ok' if ratio >= 20 else 'MISSED'}")
    print(
        f"target worst tick < 8 ms: {inc_worst * 1e3:.2f} ms "
        f"{'ok' if inc_worst < 0.008 else 'MISSED'}"
    )
    first = statistics.mean(costs[:100])
    last = statistics.mean(costs[-100:])
    worst_at = max(range(len(costs)), key=costs.__getitem__)
    print(
        f"app CPU per step: first 100 {first * 1e3:.2f} ms, last 100 {last * 1e3:.2f} ms "
        f"(x{last / first:.2f}); median {statistics.median(costs) * 1e3:.2f} ms, "
        f"worst {costs[worst_at] * 1e3:.2f} ms at step {worst_at + 1}"
    )
    print(f"target last-100 within 2x of first-100: {'ok' if last <= 2 * first else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

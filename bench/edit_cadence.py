"""Edit cadence: a long streamed reply through the real consumer and a fake platform, per budget.

    python bench/edit_cadence.py [--seconds 30] [--rate 40] [--latency 0.05]

For each platform budget (Telegram private and group, Discord, Slack) a reply of ``--seconds``
at ``--rate`` deltas per second goes through ``StreamConsumer`` into a recording platform whose
calls take ``--latency`` seconds; all four run at once, in real time. Prints per chat: calls,
the most calls in any 60 s window against the budget, and the delay from a delta's arrival to
the end of the first call that shows it (p50/p95) against the target edit_interval + 0.3 s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.recording_platform import RecordingPlatform  # noqa: E402

from iris.config import ResolvedDisplay  # noqa: E402
from iris.events import Event, SegmentEnded, TextDelta, TurnEnded  # noqa: E402
from iris.surfaces.chat.consumer import StreamConsumer  # noqa: E402
from iris.surfaces.chat.platform import Capabilities, RateBudget  # noqa: E402
from iris.surfaces.chat.reply import CURSOR  # noqa: E402
from iris.surfaces.chat.throttle import Throttle  # noqa: E402


@dataclass(frozen=True)
class Case:
    name: str
    caps: Capabilities
    budget: RateBudget


CASES = [
    Case(
        "telegram private",
        Capabilities(True, 4096, "utf16", RateBudget(1, 1.0), RateBudget(20, 60.0)),
        RateBudget(1, 1.0),
    ),
    Case(
        "telegram group",
        Capabilities(True, 4096, "utf16", RateBudget(1, 1.0), RateBudget(20, 60.0)),
        RateBudget(20, 60.0),
    ),
    Case("discord", Capabilities(True, 2000, "chars", RateBudget(5, 5.0)), RateBudget(5, 5.0)),
    Case("slack", Capabilities(True, 40_000, "chars", RateBudget(50, 60.0)), RateBudget(50, 60.0)),
]


@dataclass
class Figures:
    case: Case
    calls: int
    max_per_minute: int
    budget_per_minute: float
    p50: float
    p95: float
    worst: float
    chat_ok: bool


async def run_case(
    case: Case, seconds: float, rate: float, latency: float, interval: float
) -> Figures:
    loop = asyncio.get_running_loop()
    platform = RecordingPlatform(name=case.name, capabilities=case.caps, latency=latency)
    display = ResolvedDisplay(
        show_reasoning=False,
        reasoning_style="code",
        tool_progress="off",
        edit_interval=interval,
        buffer_threshold=24,
        min_tokens=20,
    )
    consumer = StreamConsumer(
        platform, "chat", display=display, streaming=True, throttle=Throttle(case.budget, interval)
    )
    arrivals: list[tuple[float, int]] = []  # (time, characters of the reply so far)
    count = int(seconds * rate)
    words = [f"w{i} " for i in range(count)]
    text = "".join(words)

    async def stream() -> AsyncIterator[Event]:
        start = loop.time()
        size = 0
        for i, word in enumerate(words):
            # Paced against the start, so the rate holds however long each step takes.
            await asyncio.sleep(max(0.0, start + i / rate - loop.time()))
            size += len(word)
            arrivals.append((loop.time(), size))
            yield TextDelta(word)
        yield SegmentEnded(text)
        yield TurnEnded(text)

    await consumer.consume(stream())

    # What the user could read after each call: every message's text without the cursor.
    shown: dict[str, str] = {}
    seen: list[tuple[float, int]] = []
    order: list[str] = []
    for call in platform.edits_and_sends():
        message_id = call.message_id
        if message_id not in shown:
            order.append(message_id)
        shown[message_id] = call.text.removesuffix(CURSOR)
        seen.append((call.t + latency, sum(len(shown[m]) for m in order)))
    delays: list[float] = []
    j = 0
    for t, size in arrivals:
        while j < len(seen) and (seen[j][1] < size or seen[j][0] < t):
            j += 1
        if j < len(seen):
            delays.append(seen[j][0] - t)
    times = [c.t for c in platform.edits_and_sends()]
    most = max(sum(1 for u in times if s <= u < s + 60.0) for s in times)
    ordered = sorted(delays)
    return Figures(
        case=case,
        calls=len(times),
        max_per_minute=most,
        budget_per_minute=case.budget.capacity * 60.0 / case.budget.per_seconds,
        p50=statistics.median(ordered),
        p95=ordered[int(0.95 * (len(ordered) - 1))],
        worst=ordered[-1],
        chat_ok="".join(platform.chat()) == text,
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=40.0, help="deltas per second")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per platform call")
    parser.add_argument("--interval", type=float, default=1.5, help="streaming.edit_interval")
    args = parser.parse_args()
    print(
        f"reply: {args.seconds:.0f} s at {args.rate:.0f} deltas/s, edit_interval {args.interval}s,"
        f" platform latency {args.latency * 1000:.0f} ms"
    )
    results = await asyncio.gather(
        *(run_case(c, args.seconds, args.rate, args.latency, args.interval) for c in CASES)
    )
    target = args.interval + 0.3
    header = f"{'chat':<18}{'calls':>6}{'max/min':>9}{'budget':>8}{'p50 s':>8}{'p95 s':>8}{'max s':>8}  verdict"
    print(header)
    for f in results:
        within = f.max_per_minute <= f.budget_per_minute
        fast = f.p95 <= target
        verdict = ", ".join(
            [
                "within budget" if within else "OVER BUDGET",
                f"p95 <= {target:.1f}s" if fast else f"p95 > {target:.1f}s",
                "text intact" if f.chat_ok else "TEXT DIFFERS",
            ]
        )
        print(
            f"{f.case.name:<18}{f.calls:>6}{f.max_per_minute:>9}{f.budget_per_minute:>8.0f}"
            f"{f.p50:>8.2f}{f.p95:>8.2f}{f.worst:>8.2f}  {verdict}"
        )


if __name__ == "__main__":
    asyncio.run(main())

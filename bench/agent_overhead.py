"""CPU time Iris spends per streamed delta, between the SDK's chunk and the consumer.

A fake OpenAI-compatible upstream on loopback (its own thread) streams N deltas. We measure the
event-loop thread's CPU time (``time.thread_time``, so the fake's work is not counted) for:

- baseline: the official SDK alone delivering the stream's lines (``with_streaming_response``,
  the transport Iris's chat-completions provider reads from);
- iris: the same stream through the agent (chunk parsing, round builder, think scrubber,
  events, queue) to a consumer that reads every event.
- for reference, the SDK's parsed-model iteration (``stream=True``), which builds a pydantic
  object per chunk — what Iris used before reading raw chunks.

The difference divided by N is Iris's overhead per delta. Target: < 50 µs/delta.

The fake streams as fast as it can, so one network read carries many deltas. A proxied stream
at 100 chunks/s gets one per read, and then each wake-up counts: the last lines read a turn
whose provider (a stub, no network) yields one delta per event-loop timer (0.5 ms), on uvloop,
through ``async for`` and through ``Turn.deliver`` (the turn's task hands each delta's events
to the waiting consumer: one task wake-up per delta instead of two), as process CPU per delta.

    python bench/agent_overhead.py [--deltas 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncGenerator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import openai  # noqa: E402
from tests.fakes.upstream import FakeUpstream, text  # noqa: E402

from iris.agent import Agent, TurnRequest  # noqa: E402
from iris.config import config_from_dict  # noqa: E402
from iris.events import Event, TextDelta  # noqa: E402
from iris.llm.provider import ProviderRequest, RawDelta, RawText  # noqa: E402

USER = [{"role": "user", "content": "go"}]


async def sdk_lines(base_url: str, n: int) -> tuple[float, int]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    start = time.thread_time()
    count = 0
    async with client.chat.completions.with_streaming_response.create(
        model="fake-model", messages=USER, stream=True, stream_options={"include_usage": True}
    ) as response:
        async for line in response.iter_lines():
            if line.startswith("data:"):
                count += 1
    spent = time.thread_time() - start
    await client.close()
    return spent, count


async def sdk_models(base_url: str, n: int) -> tuple[float, int]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    start = time.thread_time()
    count = 0
    stream = await client.chat.completions.create(
        model="fake-model", messages=USER, stream=True, stream_options={"include_usage": True}
    )
    async with stream:
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                count += 1
    spent = time.thread_time() - start
    await client.close()
    return spent, count


async def through_iris(base_url: str, n: int) -> tuple[float, int]:
    config = config_from_dict(
        {
            "model": {"base_url": base_url, "name": "fake-model", "api_key": "x"},
            "tools": {"enabled": []},
            "store": {"path": ":memory:"},
        },
        env={},
    )
    agent = Agent(config)
    agent.provider(0)  # client construction is start-up cost, not per-delta cost
    start = time.thread_time()
    count = 0
    async with agent.run(TurnRequest(messages=USER)) as turn:
        async for event in turn:
            if isinstance(event, TextDelta):
                count += 1
    spent = time.thread_time() - start
    await agent.aclose()
    return spent, count


class TimerProvider:
    """A provider stub: ``n`` text deltas, each after one event-loop timer."""

    name = "fake-model"

    def __init__(self, n: int) -> None:
        self.n = n

    async def stream(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        loop = asyncio.get_running_loop()
        for i in range(self.n):
            tick: asyncio.Future[None] = loop.create_future()
            loop.call_later(0.0005, tick.set_result, None)
            await tick
            yield RawText(f"w{i % 10} ")

    async def aclose(self) -> None:
        pass


async def one_per_wakeup(n: int, deliver: bool) -> float:
    """Process CPU µs per delta of a turn whose deltas come one per wake-up."""
    config = config_from_dict(
        {
            "model": {"base_url": "http://127.0.0.1:9/v1", "name": "fake-model", "api_key": "x"},
            "tools": {"enabled": []},
            "store": {"path": ":memory:"},
        },
        env={},
    )
    agent = Agent(config)
    agent._providers[0] = TimerProvider(n)  # pyright: ignore[reportPrivateUsage, reportArgumentType]
    count = 0

    async def sink(event: Event) -> None:
        nonlocal count
        count += isinstance(event, TextDelta)

    start = time.process_time()
    async with agent.run(TurnRequest(messages=USER)) as turn:
        if deliver:
            await turn.deliver(sink)
        else:
            async for event in turn:
                await sink(event)
    spent = time.process_time() - start
    assert count == n, count
    return spent / n * 1e6


async def wakeups(n: int, runs: int) -> tuple[float, float]:
    plain: list[float] = []
    handed: list[float] = []
    for _ in range(runs):
        plain.append(await one_per_wakeup(n, deliver=False))
        handed.append(await one_per_wakeup(n, deliver=True))
    return statistics.median(plain), statistics.median(handed)


async def main() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deltas", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    n = args.deltas
    chunks = [f"w{i % 10} " for i in range(n)]
    base: list[float] = []
    models: list[float] = []
    iris: list[float] = []
    with FakeUpstream() as up:
        for _ in range(args.runs):
            up.script(text(*chunks), text(*chunks), text(*chunks))
            spent, count = await sdk_lines(up.base_url, n)
            assert count >= n, count
            base.append(spent)
            spent, count = await sdk_models(up.base_url, n)
            assert count == n, count
            models.append(spent)
            spent, count = await through_iris(up.base_url, n)
            assert count == n, count
            iris.append(spent)
    b, m, i = statistics.median(base), statistics.median(models), statistics.median(iris)
    overhead_us = (i - b) / n * 1e6
    print(f"deltas per run:                 {n} ({args.runs} runs, medians)")
    print(f"SDK lines (transport):          {b * 1e6 / n:7.1f} µs CPU/delta")
    print(f"SDK parsed models (reference):  {m * 1e6 / n:7.1f} µs CPU/delta")
    print(f"SDK lines + Iris agent:         {i * 1e6 / n:7.1f} µs CPU/delta")
    print(f"Iris overhead:                  {overhead_us:7.1f} µs/delta  (target < 50)")
    print(f"ratio iris/transport:           {i / b:7.2f}x")
    return args


def per_wakeup(args: argparse.Namespace) -> None:
    import uvloop

    plain, handed = uvloop.run(wakeups(min(args.deltas, 3000), args.runs))
    print(f"one delta per wake-up, async for: {plain:6.1f} µs CPU/delta")
    print(f"one delta per wake-up, deliver:   {handed:6.1f} µs CPU/delta ({handed / plain:.2f}x)")


if __name__ == "__main__":
    per_wakeup(asyncio.run(main()))

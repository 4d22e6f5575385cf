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

    python bench/agent_overhead.py [--deltas 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import openai  # noqa: E402
from tests.fakes.upstream import FakeUpstream, text  # noqa: E402

from iris.agent import Agent, TurnRequest  # noqa: E402
from iris.config import config_from_dict  # noqa: E402
from iris.events import TextDelta  # noqa: E402

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


async def main() -> None:
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


if __name__ == "__main__":
    asyncio.run(main())

"""How long the event loop stalls, and how much memory Iris holds, while an MCP server answers
one very large result (issue 39: a 50 MB result stalled ``/health`` to 0.9 s).

Runs the agent in this process against the scripted fake upstream and the hostile fake MCP
server (``tests/fakes/mcp_hostile.py``, stdio), calls its ``big`` tool once, and prints the
longest gap between two ticks of a 10 ms timer during the call (what ``/health`` would wait)
and the peak of Python's traced memory.

    python bench/mcp_result.py [--mb 50] [--cap 4194304]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.fakes.upstream import FakeUpstream, text, tool_call  # noqa: E402

from iris.agent import Agent, TurnRequest  # noqa: E402
from iris.config import config_from_dict  # noqa: E402


async def ticker(stop: asyncio.Event, gaps: list[float]) -> None:
    last = time.monotonic()
    while not stop.is_set():
        await asyncio.sleep(0.01)
        now = time.monotonic()
        gaps.append(now - last)
        last = now


async def turn(agent: Agent) -> None:
    async with agent.run(TurnRequest(messages=[{"role": "user", "content": "go"}])) as running:
        async for _ in running:
            pass


async def run(args: argparse.Namespace) -> None:
    server = {
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_hostile"],
        "env": {"PYTHONPATH": str(ROOT)},
    }
    with FakeUpstream() as upstream:
        upstream.script(
            tool_call("mcp_h_echo", [json.dumps({"text": "warm"})]),
            text("warm"),
            tool_call("mcp_h_big", [json.dumps({"mb": args.mb})]),
            text("done"),
        )
        config = config_from_dict(
            {
                "model": {"base_url": upstream.base_url, "name": "fake-model", "api_key": "k"},
                "mcp_servers": {"h": server},
                "tools": {"approval": {"mode": "off"}, "mcp": {"max_result_bytes": args.cap}},
            }
        )
        agent = Agent(config)
        await agent.start_tools()
        await turn(agent)  # the first turn imports and builds what a turn needs: not measured
        stop, gaps = asyncio.Event(), list[float]()
        tick = asyncio.create_task(ticker(stop, gaps))
        tracemalloc.start()
        started = time.monotonic()
        try:
            await turn(agent)
            took = time.monotonic() - started
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            stop.set()
            await tick
            await agent.aclose()
        told = next(m for m in upstream.requests[-1].body["messages"] if m["role"] == "tool")
    print(f"result of {args.mb:g} MB, cap {args.cap:,} bytes: the call took {took:.2f} s")
    print(f"longest event-loop gap during it: {max(gaps) * 1000:.0f} ms")
    print(f"peak traced memory: {peak / 1e6:.1f} MB")
    print(f"the model was told: {str(told['content'])[:120]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--cap", type=int, default=4_194_304)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

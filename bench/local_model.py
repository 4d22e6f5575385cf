"""Tokens per second of the embedded model, for 1 and for 4 turns at once, and first-token latency.

Starts the embedded provider (``iris.llm.local``: llama.cpp's server engine from the xllamacpp
wheel in its own process, ``model.local.parallel`` slots) on the packaged Gemma 3 270M, then
streams the same counting prompt as 1 turn, then as 4 concurrent turns. For each: the tokens
all turns streamed per second of wall time, each turn's own tokens per second, and the time to
each turn's first token. With 2 slots (the default), 4 turns run 2 at a time: the last two wait.

    python bench/local_model.py [--parallel 2] [--tokens 64] [--rounds 2] [--model FILE.gguf]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from iris.config import config_from_dict  # noqa: E402
from iris.llm.base import ProviderRequest, RawText, RawUsage  # noqa: E402
from iris.llm.local import LocalProvider, usable_cores  # noqa: E402

PROMPT = "Count from one to five hundred: 1, 2, 3, 4, 5, 6, 7, 8,"


async def one_turn(provider: LocalProvider, tokens: int, seed: int) -> tuple[float, float, int]:
    """(first-token latency, seconds, tokens) of one streamed turn."""
    request = ProviderRequest(
        "bench",
        [{"role": "user", "content": PROMPT}],
        max_tokens=tokens,
        params={"seed": seed, "stop": ["\n"]},
    )
    started = time.perf_counter()
    first = 0.0
    produced = 0
    async for delta in provider.stream(request):
        if isinstance(delta, RawText) and not first:
            first = time.perf_counter() - started
        if isinstance(delta, RawUsage):
            produced = delta.output_tokens
    return first, time.perf_counter() - started, produced


async def case(provider: LocalProvider, turns: int, tokens: int) -> None:
    started = time.perf_counter()
    results = await asyncio.gather(*(one_turn(provider, tokens, n) for n in range(turns)))
    wall = time.perf_counter() - started
    total = sum(r[2] for r in results)
    firsts = [r[0] for r in results]
    each = [r[2] / r[1] for r in results if r[1] > 0]
    print(
        f"  {turns} turn(s) at once: {total / wall:6.1f} tokens/s in all, "
        f"{statistics.mean(each):5.1f} tokens/s per turn, first token "
        f"{statistics.mean(firsts) * 1000:6.0f} ms mean / {max(firsts) * 1000:6.0f} ms max "
        f"({total} tokens, {wall:.1f} s)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parallel", type=int, default=2, help="model.local.parallel")
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: default)")
    parser.add_argument("--tokens", type=int, default=64, help="max tokens per turn")
    parser.add_argument("--rounds", type=int, default=2, help="measurements of each case")
    parser.add_argument("--model", default="", help="a GGUF (default: the packaged model)")
    args = parser.parse_args()
    config = config_from_dict(
        {
            "model": {
                "provider": "local",
                "local_path": args.model,
                "local": {"parallel": args.parallel},
            }
        },
        env={},
    )
    provider = LocalProvider(config.model)
    provider.threads = args.threads or provider.threads
    started = time.perf_counter()
    await provider.count_tokens([])  # starts the process and loads the model
    print(
        f"embedded model: {provider.parallel} slot(s), {provider.threads} thread(s), "
        f"{usable_cores()} usable core(s) of {os.cpu_count()}; process started and model loaded in "
        f"{time.perf_counter() - started:.1f} s"
    )
    try:
        await one_turn(provider, 8, 0)  # warm: the first decode allocates
        for n in range(args.rounds):
            print(f"round {n + 1}:")
            for turns in (1, 4):
                await case(provider, turns, args.tokens)
    finally:
        await provider.aclose()


if __name__ == "__main__":
    asyncio.run(main())

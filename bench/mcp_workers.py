"""What N copies of a stdio MCP server cost (``iris serve --workers N`` starts one per process):
the resident memory of each child and the time from spawn to its tools listed.

Starts the fake MCP server (``tests/fakes/mcp_server.py``, a Python server written with the
``mcp`` SDK) N times through Iris's own connection (``McpConnection``, stdio) and prints, per
copy and in all, the child's RSS (``/proc/<pid>/status``, Linux) and its connect time.

    python bench/mcp_workers.py [--workers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.fakes.mcp_launch import stdio  # noqa: E402

from iris.agent.mcp.connection import McpConnection  # noqa: E402
from iris.config import McpServerConfig  # noqa: E402


def children_rss_kb(parent: int) -> list[int]:
    """RSS in kB of each process whose parent is ``parent``."""
    sizes: list[int] = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(
                line.split(":", 1) for line in status.read_text().splitlines() if ":" in line
            )
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(parent) and "VmRSS" in fields:
            sizes.append(int(fields["VmRSS"].split()[0]))
    return sizes


async def one(index: int) -> tuple[McpConnection, asyncio.Task[None], float]:
    connection = McpConnection(
        f"copy{index}",
        McpServerConfig.model_validate(stdio()),
        terminal_env=["PATH", "HOME"],
        output_limit=10_000,
        on_change=lambda _c: None,
    )
    started = time.perf_counter()
    task = asyncio.create_task(connection.run())
    await connection.attempted.wait()
    assert connection.state == "connected", connection.error
    return connection, task, time.perf_counter() - started


async def main(workers: int) -> None:
    copies = [await one(i) for i in range(workers)]
    sizes = children_rss_kb(__import__("os").getpid())
    for n, (_, _, took) in enumerate(copies):
        print(f"copy {n}: connected in {took * 1000:.0f} ms")
    print(f"children: {len(sizes)}, RSS each: {', '.join(f'{s / 1024:.1f} MB' for s in sizes)}")
    print(f"workers={workers}: {sum(sizes) / 1024:.1f} MB in all for one stdio server")
    for connection, task, _ in copies:
        connection.stop()
        await task


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=4)
    asyncio.run(main(parser.parse_args().workers))

"""What the terminal's sandbox adds to starting a command (issue 37).

Runs ``true`` through the terminal tool's own paths: on the host (``tools.terminal.sandbox:
none``) and in the sandbox (bwrap, prlimit, the seccomp filter, a fresh workspace bind), each
``--runs`` times after a warm-up, and prints the median of each and what the sandbox adds. The
aim is under 20 ms added.

    PYTHONPATH=src python bench/sandbox.py [--runs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
from pathlib import Path

from iris.agent.tools import CALL_CHAT, Tool, builtin_tools
from iris.config import config_from_dict


def terminal(data_dir: Path, sandbox: str) -> Tool:
    config = config_from_dict({"tools": {"terminal": {"sandbox": sandbox, "cwd": str(data_dir)}}})
    tool = builtin_tools(config.tools, data_dir=data_dir).get("terminal")
    assert tool is not None, f"no terminal with sandbox: {sandbox}"
    return tool


async def times(tool: Tool, runs: int) -> list[float]:
    CALL_CHAT.set("bench")
    out: list[float] = []
    for index in range(runs + 3):  # the first few warm the page cache
        started = time.perf_counter()
        result = await tool.run({"command": "true"}, lambda _note: None)
        elapsed = time.perf_counter() - started
        assert result.ok, result.output
        if index >= 3:
            out.append(elapsed)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # sandbox: none warns at every start, by design
    with tempfile.TemporaryDirectory() as folder:
        data_dir = Path(folder)
        host = asyncio.run(times(terminal(data_dir, "none"), args.runs))
        boxed = asyncio.run(times(terminal(data_dir, "auto"), args.runs))
    host_ms = statistics.median(host) * 1000
    boxed_ms = statistics.median(boxed) * 1000
    print(f"`true` on the host:     median {host_ms:6.1f} ms of {args.runs}")
    print(f"`true` in the sandbox:  median {boxed_ms:6.1f} ms of {args.runs}")
    added = boxed_ms - host_ms
    print(f"added by the sandbox:   {added:6.1f} ms (aim: under 20 ms)")


if __name__ == "__main__":
    main()

"""How long ``iris serve`` takes to start: the import of the server, and launch to listening.

Each figure from fresh processes: ``import`` is ``iris.server.asgi``'s cumulative time under
``python -X importtime -c "import iris.server.asgi, iris.server.workers"``, ``import cpu`` the
CPU time of that import (``time.process_time``, without importtime); ``listening`` is the wall
time from launching ``iris serve`` (a minimal config: a model that is never asked, the iris
socket and the API on, no ``mcp_servers:``) to its "Uvicorn running on" line, ``listening
cpu`` the CPU time the process had used by then (``/proc/<pid>/task/*/schedstat``, every
thread). The machine's neighbours add to the wall times, never subtract, and barely touch the
CPU times: the least of the runs is the figure, the median says how noisy they were. With ``--against OTHER/src`` (an older commit's
``git archive``) both checkouts run in turn, round after round, so both see the same load.

    python bench/startup.py [--runs 3] [--against OTHER/src]

It also lists which of the optional SDKs the import loaded (the MCP SDK is loaded only by a
config with ``mcp_servers:``, or by ``/mcp``'s first request).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.served import free_port, write_config  # noqa: E402

SRC = ROOT / "src"
SERVER = "import iris.server.asgi, iris.server.workers"
OPTIONAL = ("mcp", "mcp_types", "a2a", "slack_sdk", "telegram", "discord", "redis", "openai")
CUMULATIVE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \|\s*iris\.server\.asgi$", re.MULTILINE)


def env_for(src: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": src}


def import_ms(src: str) -> float:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", SERVER],
        env=env_for(src),
        capture_output=True,
        text=True,
        check=True,
    )
    found = CUMULATIVE.search(done.stderr)
    assert found is not None, done.stderr[-2000:]
    return int(found.group(1)) / 1000


def import_cpu_ms(src: str) -> float:
    code = f"import time; t = time.process_time(); {SERVER}; print(time.process_time() - t)"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env_for(src), capture_output=True, text=True, check=True
    )
    return float(done.stdout) * 1000


def cpu_ms(pid: int) -> float:
    """CPU time process ``pid`` has used so far, all its threads."""
    tasks = Path(f"/proc/{pid}/task").iterdir()
    return sum(int((task / "schedstat").read_text().split()[0]) for task in tasks) / 1e6


def loaded(src: str) -> list[str]:
    code = f"import sys; {SERVER}; print(*[m for m in {OPTIONAL!r} if m in sys.modules])"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env_for(src), capture_output=True, text=True, check=True
    )
    return done.stdout.split()


def listening_ms(src: str, folder: Path) -> tuple[float, float]:
    """Launch to listening: the wall time and the CPU time."""
    port = free_port()
    config = write_config(
        folder, "http://127.0.0.1:9/v1", port, platforms={"iris": {"enabled": True}}
    )
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "iris.cli", "serve", "--config", str(config)],
        env=env_for(src),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "Uvicorn running on" in line:
                return (time.perf_counter() - started) * 1000, cpu_ms(process.pid)
        raise AssertionError(f"iris serve ended before listening (exit {process.wait()})")
    finally:
        process.terminate()
        process.wait(30)
        if process.stderr is not None:
            process.stderr.close()


def figures(name: str, values: list[float]) -> str:
    runs = " ".join(f"{v:.0f}" for v in values)
    return f"{name:>13}: least {min(values):6.0f} ms  median {statistics.median(values):6.0f} ms  ({runs})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each figure per checkout")
    parser.add_argument("--against", default=None, help="another checkout's src to compare")
    args = parser.parse_args()
    trees = {"this": str(SRC)} | ({"other": args.against} if args.against else {})
    kinds = ("import", "import cpu", "listening", "listening cpu")
    runs: dict[str, dict[str, list[float]]] = {name: {k: [] for k in kinds} for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            for name, src in trees.items():
                runs[name]["import"].append(import_ms(src))
            for name, src in trees.items():
                runs[name]["import cpu"].append(import_cpu_ms(src))
            for name, src in trees.items():
                folder = Path(tmp) / f"{name}-{len(runs[name]['listening'])}"
                folder.mkdir()
                wall, cpu = listening_ms(src, folder)
                runs[name]["listening"].append(wall)
                runs[name]["listening cpu"].append(cpu)
    for name, src in trees.items():
        print(f"{name}: {src}")
        print(f"    loaded by the import: {' '.join(loaded(src)) or 'none of them'}")
        for kind in kinds:
            print("    " + figures(kind, runs[name][kind]))


if __name__ == "__main__":
    main()

"""Fan-out of one chat to many devices over the iris WebSocket: bytes, delay, memory.

The server (``iris.server.asgi.build_app`` on uvicorn, SQLite frame log) runs in a child process with
a scripted agent that emits a reply of N text deltas at a steady rate and records, for each
event, the ``time.monotonic()`` at which it handed it to the surface. This process connects
the devices with the ``websockets`` client, sends one message and receives everything.
``CLOCK_MONOTONIC`` is system-wide, so the two processes' clocks compare.

For each reply length (``--sizes``, characters) and each kind of device — doc 05 devices that
get ``message.update`` snapshots, and devices that ask for the ``append`` feature — it prints:

- bytes received per device for the reply (every frame of the turn: JSON plus the WebSocket
  frame header), and that divided by the reply's length (the *wire ratio*);
- frames per device and frames per second delivered (all devices together);
- the delay from the agent event behind a frame (the newest delta its text contains) to the
  device's receipt: p50, p99, max;
- memory per idle connection: the server's RSS growth over ``--idle`` extra connected devices.

Targets: with ``append`` the wire ratio stays flat (within 10 % from the shortest to the
longest reply) and below 4x; p99 < 50 ms; < 64 KiB per idle connection.

``iris serve`` declines permessage-deflate (``UVICORN_WS_OPTIONS``), so whether devices offer
it changes nothing; ``--compression on`` shows that.

    python bench/ws_fanout.py [--devices 100] [--sizes 2000,8000,20000] [--rate 200]
                              [--idle 500] [--features both|append|none] [--threshold N]
                              [--compression off|on|both]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

TOKEN = "bench-device-token-0123"
WORD = 4  # characters per delta, so a snapshot's length says which delta it ends with


# ---------------------------------------------------------------- the server (child process)


class ScriptedTurn:
    def __init__(self, deltas: int, rate: float, times_file: str) -> None:
        self.turn_id = "turn_bench"
        self.compaction = None  # the bench's history is one message: nothing to compact
        self._deltas, self._rate, self._times_file = deltas, rate, times_file

    async def __aenter__(self) -> ScriptedTurn:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def interrupt(self, reason: str = "interrupted") -> None:
        return None

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    async def _events(self) -> AsyncIterator[Any]:
        from iris.events import SegmentEnded, TextDelta, TurnEnded, TurnStarted

        times: list[float] = []
        yield TurnStarted(self.turn_id, "bench-model")
        start = time.monotonic()
        text = ""
        for i in range(self._deltas):
            delay = start + i / self._rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            word = f"{i % 1000:03d} "
            text += word
            times.append(time.monotonic())
            yield TextDelta(word)
        times.append(time.monotonic())
        yield SegmentEnded(text)
        usage = {"input_tokens": 1, "output_tokens": self._deltas, "total_tokens": self._deltas + 1}
        times.append(time.monotonic())
        yield TurnEnded(text, model="bench-model", usage=usage)
        await asyncio.to_thread(_write_whole, self._times_file, json.dumps(times))


def _write_whole(path: str, text: str) -> None:
    """Write then rename: the reader polls the file and must never see half of it."""
    Path(path + ".part").write_text(text)
    os.replace(path + ".part", path)


class ScriptedAgent:
    model_name = "bench-model"

    def __init__(self, deltas: int, rate: float, times_file: str) -> None:
        self._args = (deltas, rate, times_file)

    def prepare(self) -> None:
        return None  # no SDK client to build ahead of the first turn

    async def start_tools(self) -> None:
        return None  # no MCP servers: the lifespan asks every agent to connect its own

    def run(self, request: Any) -> ScriptedTurn:
        return ScriptedTurn(*self._args)

    async def aclose(self) -> None:
        return None


def serve(
    port: int, deltas: int, rate: float, times_file: str, db: str, threshold: int | None
) -> None:
    import uvicorn

    from iris.config import config_from_dict
    from iris.runtime import Runtime
    from iris.server.asgi import UVICORN_WS_OPTIONS, build_app

    # No --threshold: the config sets none, so the server's own default is what is measured.
    iris_display = {} if threshold is None else {"buffer_threshold": threshold}
    config = config_from_dict(
        {
            "store": {"path": db},
            "streaming": {"enabled": True},
            "display": {"platforms": {"iris": iris_display}},
            "platforms": {"iris": {"tokens": [TOKEN]}, "api_server": {"enabled": False}},
        },
        env={},
    )
    agent: Any = ScriptedAgent(deltas, rate, times_file)
    app = build_app(config, Runtime.create(config, agent=agent))
    # The same WebSocket options as ``iris serve``.
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", **UVICORN_WS_OPTIONS)


# ---------------------------------------------------------------- the devices (this process)


async def device(url: str, compression: str | None, features: list[str] | None) -> Any:
    from websockets.asyncio.client import connect

    ws = await connect(url, open_timeout=30, max_size=1 << 24, compression=compression)
    hello: dict[str, Any] = {"type": "hello", "token": TOKEN}
    if features is not None:
        hello["features"] = features
    await ws.send(json.dumps(hello))
    json.loads(await ws.recv())  # ready
    return ws


def ws_header(payload: int) -> int:
    """Bytes of a server-to-client WebSocket frame header (unmasked) for a payload size."""
    return 2 if payload < 126 else 4 if payload < 1 << 16 else 10


@dataclass
class Received:
    """One device's view of the turn: (time, type, length of the text it now holds)."""

    frames: list[tuple[float, str, int]] = field(default_factory=list[tuple[float, str, int]])
    wire_bytes: int = 0


async def receive(ws: Any, got: Received) -> None:
    held = 0  # the text length this device holds (ASCII reply: characters = UTF-16 units)
    while True:
        raw = await ws.recv()
        at = time.monotonic()
        size = len(raw.encode()) if isinstance(raw, str) else len(raw)
        got.wire_bytes += size + ws_header(size)
        frame = json.loads(raw)
        kind = frame["type"]
        if kind == "message.append" or (kind == "message.stop" and "offset" in frame):
            held = frame["offset"] + len(frame["text"])
        elif kind == "message.update":
            held = len(frame["text"])
        elif kind == "message.stop":
            held = len(frame["final_text"])
        got.frames.append((at, kind, held))
        if kind == "typing" and frame["on"] is False:
            return


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


@dataclass
class Result:
    size: int
    features: str
    ratio: float
    p99_ms: float
    idle_kib: float


def bench(args: argparse.Namespace, size: int, features: str, compression: str) -> Result:
    deltas = max(1, size // WORD)
    with tempfile.TemporaryDirectory() as tmp:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        times_file = os.path.join(tmp, "times.json")
        threshold = [] if args.threshold is None else ["--threshold", str(args.threshold)]
        child = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(port), "--deltas", str(deltas),
             "--rate", str(args.rate), "--times", times_file, "--db", os.path.join(tmp, "i.db"),
             *threshold]
        )  # fmt: skip
        try:
            url = f"ws://127.0.0.1:{port}/iris/ws"
            run = run_devices(args, deltas, features, compression, url, child.pid, times_file)
            return asyncio.run(run)
        finally:
            child.terminate()
            child.wait(10)


def read_times(path: str) -> list[float] | None:
    file = Path(path)
    return json.loads(file.read_text()) if file.exists() else None


async def wait_port(url: str) -> None:
    from websockets.asyncio.client import connect

    for _ in range(1200):  # a minute: start-up on a busy shared machine is slow
        try:
            ws = await connect(url, open_timeout=1)
            await ws.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError("server did not start")


async def run_devices(
    args: argparse.Namespace,
    deltas: int,
    features: str,
    compression: str,
    url: str,
    pid: int,
    times_file: str,
) -> Result:
    await wait_port(url)
    asked = ["append"] if features == "append" else None
    offer = None if compression == "off" else "deflate"
    sockets = await asyncio.gather(*(device(url, offer, asked) for _ in range(args.devices)))
    views = [Received() for _ in range(args.devices)]
    # Device 0 sends; the others measure (the sender does not get its own echo back).
    readers = [asyncio.create_task(receive(ws, views[i])) for i, ws in enumerate(sockets)]
    cpu0 = time.process_time()
    await sockets[0].send(json.dumps({"type": "message.send", "text": "go"}))
    async with asyncio.timeout(deltas / args.rate + 120):
        await asyncio.gather(*readers)
    client_cpu = time.process_time() - cpu0
    emitted = None
    for _ in range(100):
        emitted = read_times(times_file)
        if emitted is not None:
            break
        await asyncio.sleep(0.05)
    assert emitted is not None, "the server never finished the turn"
    first, end_of_turn = emitted[0], emitted[-1]
    reply = deltas * WORD

    delays: list[float] = []
    frames = 0
    last = 0.0
    text_frames: list[int] = []
    for view in views[1:]:
        n_text = 0
        for at, kind, held in view.frames:
            if kind == "message" and held == 0:  # the user's echo, before the turn
                continue
            frames += 1
            last = max(last, at)
            if kind in ("message.update", "message.append"):
                n_text += 1
                delays.append(at - emitted[held // WORD - 1])
            elif kind == "message.start":
                delays.append(at - emitted[0])
            elif kind in ("message.stop", "typing") and at >= end_of_turn:
                delays.append(at - end_of_turn)
        text_frames.append(n_text)
    received = [view.wire_bytes for view in views[1:]]
    per_device = statistics.mean(received)
    ratio = per_device / reply
    span = last - first
    p99 = percentile(delays, 99) * 1000
    print(f"reply {reply:,} characters ({deltas} deltas at {args.rate:g}/s, an update per "
          f"{cadence(args)} characters), {args.devices} devices asking for features: {features}, "
          f"permessage-deflate offered: {compression}")  # fmt: skip
    print(f"  bytes per device      {per_device:,.0f} (min {min(received):,}, "
          f"max {max(received):,}) = {ratio:.2f}x the reply")  # fmt: skip
    print(f"  text frames / device  min {min(text_frames)}, max {max(text_frames)}; "
          f"{frames / span:,.0f} frames/s delivered in all")  # fmt: skip
    print(
        f"  event -> device delay p50 {statistics.median(delays) * 1000:.1f} ms, "
        f"p99 {p99:.1f} ms, max {max(delays) * 1000:.1f} ms ({len(delays)} frames)"
    )
    print(f"  client CPU            {client_cpu:.2f} s for all devices (this process)")
    for ws in sockets:
        await ws.close()

    # Memory: the server's RSS growth over many idle, authenticated connections.
    await asyncio.sleep(0.5)
    before = rss_kib(pid)
    idle = await asyncio.gather(*(device(url, offer, asked) for _ in range(args.idle)))
    await asyncio.sleep(0.5)
    after = rss_kib(pid)
    per_connection = (after - before) / args.idle
    print(
        f"  memory per idle conn  {per_connection:.1f} KiB "
        f"(server RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB over {args.idle})"
    )
    for ws in idle:
        await ws.close()
    return Result(reply, features, ratio, p99, per_connection)


def cadence(args: argparse.Namespace) -> str:
    """The update cadence measured: ``--threshold``, or the server's default for iris."""
    if args.threshold is not None:
        return str(args.threshold)
    from iris.surfaces.socket.room import IRIS_BUFFER_THRESHOLD

    return f"{IRIS_BUFFER_THRESHOLD} (the server's default)"


def summary(results: list[Result]) -> None:
    print("summary (wire ratio = bytes per device / reply length)")
    kinds = sorted({r.features for r in results})
    sizes = sorted({r.size for r in results})
    print("  reply chars " + "".join(f"{k:>12}" for k in kinds))
    for size in sizes:
        row = {r.features: r.ratio for r in results if r.size == size}
        print(f"  {size:>11,} " + "".join(f"{row.get(k, 0):>11.2f}x" for k in kinds))
    for kind in kinds:
        mine = [r for r in results if r.features == kind]
        ratios = [r.ratio for r in mine]
        spread = max(ratios) / min(ratios) - 1
        p99 = max(r.p99_ms for r in mine)
        idle = max(r.idle_kib for r in mine)
        print(f"  {kind}: ratio {min(ratios):.2f}-{max(ratios):.2f}x (spread {spread:.0%}), "
              f"worst p99 {p99:.1f} ms, worst idle memory {idle:.1f} KiB")  # fmt: skip
        if kind == "append":
            flat = "met" if spread <= 0.10 else "MISSED"
            low = "met" if max(ratios) < 4 else "MISSED"
            print(f"  target flat within 10 %: {flat}; below 4x: {low}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--devices", type=int, default=100)
    parser.add_argument(
        "--sizes", default="2000,8000,20000", help="reply lengths in characters, comma-separated"
    )
    parser.add_argument("--rate", type=float, default=200.0, help="deltas per second")
    parser.add_argument("--idle", type=int, default=500)
    parser.add_argument(
        "--threshold",
        type=int,
        help="display.platforms.iris.buffer_threshold: characters waiting before an update "
        "(default: not set, the server's own default)",
    )
    parser.add_argument(
        "--features",
        choices=["both", "append", "none"],
        default="both",
        help="devices ask for the append feature, or not (doc 05 snapshots)",
    )
    parser.add_argument(
        "--compression",
        choices=["on", "off", "both"],
        default="off",
        help="devices offer permessage-deflate (the websockets default) or not",
    )
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--deltas", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--times", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.deltas, args.rate, args.times, args.db, args.threshold)
        return
    sizes = [int(size) for size in args.sizes.split(",")]
    kinds = ["none", "append"] if args.features == "both" else [args.features]
    modes = ["off", "on"] if args.compression == "both" else [args.compression]
    results: list[Result] = []
    for mode in modes:
        for size in sizes:
            for kind in kinds:
                results.append(bench(args, size, kind, mode))
                print()
    summary(results)


if __name__ == "__main__":
    main()

"""Fan-out of one chat to many devices over the iris WebSocket: throughput, delay, memory.

The server (``iris.server.build_app`` on uvicorn, SQLite frame log) runs in a child process with
a scripted agent that emits a reply of N text deltas at a steady rate and records, for each
event, the ``time.monotonic()`` at which it handed it to the surface. This process connects
the devices with the ``websockets`` client, sends one message and receives everything.
``CLOCK_MONOTONIC`` is system-wide, so the two processes' clocks compare.

Printed:

- frames per second delivered (all devices together, from the first delta to the last receipt);
- the delay from the agent event behind a frame (the newest delta its snapshot contains) to the
  device's receipt: p50, p99, max;
- memory per idle connection: the server's RSS growth over ``--idle`` extra connected devices.

Targets: p99 < 50 ms; < 64 KiB per idle connection.

It runs twice: devices that do not offer permessage-deflate, then devices that do (the
``websockets`` default). ``iris serve`` declines compression (``UVICORN_WS_OPTIONS``): it cost
one zlib pass over every full snapshot for every device and ~35 KiB per idle connection, so
both runs should now look alike.

    python bench/ws_fanout.py [--devices 100] [--deltas 2000] [--rate 200] [--idle 500]
                              [--compression both|on|off]
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

TOKEN = "bench-token"
WORD = 4  # characters per delta, so a snapshot's length says which delta it ends with


# ---------------------------------------------------------------- the server (child process)


class ScriptedTurn:
    def __init__(self, deltas: int, rate: float, times_file: str) -> None:
        self.turn_id = "turn_bench"
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
        await asyncio.to_thread(Path(self._times_file).write_text, json.dumps(times))


class ScriptedAgent:
    model_name = "bench-model"

    def __init__(self, deltas: int, rate: float, times_file: str) -> None:
        self._args = (deltas, rate, times_file)

    def run(self, request: Any) -> ScriptedTurn:
        return ScriptedTurn(*self._args)

    async def aclose(self) -> None:
        return None


def serve(port: int, deltas: int, rate: float, times_file: str, db: str) -> None:
    import uvicorn

    from iris.config import config_from_dict
    from iris.runtime import Runtime
    from iris.server import UVICORN_WS_OPTIONS, build_app

    config = config_from_dict(
        {
            "store": {"path": db},
            "streaming": {"enabled": True},
            "platforms": {"iris": {"tokens": [TOKEN]}, "api_server": {"enabled": False}},
        },
        env={},
    )
    agent: Any = ScriptedAgent(deltas, rate, times_file)
    app = build_app(config, Runtime.create(config, agent=agent))
    # The same WebSocket options as ``iris serve``.
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", **UVICORN_WS_OPTIONS)


# ---------------------------------------------------------------- the devices (this process)


async def device(url: str, compression: str | None) -> Any:
    from websockets.asyncio.client import connect

    ws = await connect(url, open_timeout=30, max_size=1 << 22, compression=compression)
    await ws.send(json.dumps({"type": "hello", "token": TOKEN}))
    json.loads(await ws.recv())  # ready
    return ws


async def receive(ws: Any, log: list[tuple[float, str, int]]) -> None:
    while True:
        raw = await ws.recv()
        at = time.monotonic()
        frame = json.loads(raw)
        log.append((at, frame["type"], len(frame.get("text", frame.get("final_text", "")))))
        if frame["type"] == "typing" and frame["on"] is False:
            return


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def bench(args: argparse.Namespace, compression: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        times_file = os.path.join(tmp, "times.json")
        child = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(port), "--deltas", str(args.deltas),
             "--rate", str(args.rate), "--times", times_file, "--db", os.path.join(tmp, "i.db")]
        )  # fmt: skip
        try:
            url = f"ws://127.0.0.1:{port}/iris/ws"
            asyncio.run(run_devices(args, compression, url, child.pid, times_file))
        finally:
            child.terminate()
            child.wait(10)


def read_times(path: str) -> list[float] | None:
    file = Path(path)
    return json.loads(file.read_text()) if file.exists() else None


async def wait_port(url: str) -> None:
    from websockets.asyncio.client import connect

    for _ in range(200):
        try:
            ws = await connect(url, open_timeout=1)
            await ws.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError("server did not start")


async def run_devices(
    args: argparse.Namespace, compression: str, url: str, pid: int, times_file: str
) -> None:
    await wait_port(url)
    logs: list[list[tuple[float, str, int]]] = [[] for _ in range(args.devices)]
    offer = None if compression == "off" else "deflate"
    sockets = await asyncio.gather(*(device(url, offer) for _ in range(args.devices)))
    readers = [asyncio.create_task(receive(ws, logs[i])) for i, ws in enumerate(sockets)]
    cpu0 = time.process_time()
    await sockets[0].send(json.dumps({"type": "message.send", "text": "go"}))
    async with asyncio.timeout(args.deltas / args.rate + 120):
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

    delays: list[float] = []
    frames = 0
    last = 0.0
    updates: list[int] = []
    for log in logs:
        n_updates = 0
        for at, kind, length in log:
            if kind == "message" and length == 2:  # the user's echo, before the turn
                continue
            frames += 1
            last = max(last, at)
            if kind == "message.update":
                n_updates += 1
                delays.append(at - emitted[length // WORD - 1])
            elif kind == "message.start":
                delays.append(at - emitted[0])
            elif kind in ("message.stop", "typing") and at >= end_of_turn:
                delays.append(at - end_of_turn)
        updates.append(n_updates)
    span = last - first
    print(f"devices {args.devices}, reply of {args.deltas} deltas at {args.rate:g}/s "
          f"({args.deltas * WORD} characters), iris cadence 0.8 s / 24 characters, "
          f"permessage-deflate {compression}")  # fmt: skip
    print(f"frames delivered        {frames} in {span:.2f} s = {frames / span:,.0f} frames/s")
    print(f"updates per device      min {min(updates)}, max {max(updates)}")
    print(
        f"event -> device delay   p50 {statistics.median(delays) * 1000:.1f} ms, "
        f"p99 {percentile(delays, 99) * 1000:.1f} ms, max {max(delays) * 1000:.1f} ms "
        f"({len(delays)} frames)"
    )
    p99 = percentile(delays, 99) * 1000
    print(f"target p99 < 50 ms      {'met' if p99 < 50 else 'MISSED'} ({p99:.1f} ms)")
    print(f"client CPU              {client_cpu:.2f} s for all devices (this process)")
    for ws in sockets:
        await ws.close()

    # Memory: the server's RSS growth over many idle, authenticated connections.
    await asyncio.sleep(0.5)
    before = rss_kib(pid)
    idle = await asyncio.gather(*(device(url, offer) for _ in range(args.idle)))
    await asyncio.sleep(0.5)
    after = rss_kib(pid)
    per_connection = (after - before) / args.idle
    print(
        f"memory per idle conn    {per_connection:.1f} KiB "
        f"(server RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB over {args.idle} connections)"
    )
    print(f"target < 64 KiB         {'met' if per_connection < 64 else 'MISSED'}")
    for ws in idle:
        await ws.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--devices", type=int, default=100)
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=200.0, help="deltas per second")
    parser.add_argument("--idle", type=int, default=500)
    parser.add_argument(
        "--compression",
        choices=["on", "off", "both"],
        default="both",
        help="devices offer permessage-deflate (the websockets default) or not",
    )
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--times", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.deltas, args.rate, args.times, args.db)
        return
    for mode in ("off", "on") if args.compression == "both" else (args.compression,):
        bench(args, mode)
        print()


if __name__ == "__main__":
    main()

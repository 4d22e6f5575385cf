"""Bytes a streamed reply writes to the frame log, per reply character; ``/health`` meanwhile.

The server (``iris.server.asgi.build_app`` on uvicorn) runs in a child process with the scripted agent
of ``bench/ws_fanout.py`` (4-character text deltas at ``--rate`` per second); one device (the
``append`` feature) sends a message and reads the reply; a thread asks ``/health`` every 10 ms.
The frame log is SQLite (the bytes the server process handed to ``write(2)``, from
``/proc/<pid>/io``, less the WebSocket bytes the device received) or a real ``redis-server``
(the bytes it received, ``INFO stats`` ``total_net_input_bytes``).

Before finding 1 of the second hardening pass was fixed, each coalesced update stored a whole
snapshot: bytes grew with the square of the reply (988 MB to SQLite and 424 MB to Redis for
200 000 characters). Targets: bytes per character flat within 2x from 2 000 to 200 000
characters; ``/health`` p99 < 20 ms during the 200 000-character reply.

    python bench/log_writes.py [--sizes 2000,20000,200000] [--rate 20000] [--stores sqlite,redis]

Measured after the fix (``--rate 5000``, 2-core machine): SQLite 377 / 454 / 450 bytes per
character at 2 000 / 20 000 / 200 000, Redis 28 / 21 / 21; ``/health`` p99 during the
200 000-character reply 5.0 ms (SQLite) and 9.4 ms (Redis).

With a live message's updates held 500 ms / 4 KB (issue 45; ``--rate 1000``, a shared machine
at load 15): SQLite 62 / 36 / 39 bytes per character (243 / 301 / 348 before); Redis
unchanged (~18-25). docs/performance.md has the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ws_fanout import TOKEN, WORD, ScriptedAgent, percentile, wait_port  # noqa: E402


def serve(port: int, deltas: int, rate: float, times: str, db: str, redis_url: str) -> None:
    import uvicorn

    from iris.config import config_from_dict
    from iris.runtime import Runtime
    from iris.server.asgi import UVICORN_WS_OPTIONS, build_app

    store: dict[str, Any] = {"path": db}
    if redis_url:
        store["url"] = redis_url
    config = config_from_dict(
        {
            "store": store,
            "streaming": {"enabled": True},
            "platforms": {"iris": {"tokens": [TOKEN]}, "api_server": {"enabled": False}},
        },
        env={},
    )
    app = build_app(config, Runtime.create(config, agent=ScriptedAgent(deltas, rate, times)))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", **UVICORN_WS_OPTIONS)


def wchar(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise RuntimeError("no wchar")


async def one_reply(url: str) -> int:
    """Send a message, read the reply to its end; the WebSocket bytes received."""
    from websockets.asyncio.client import connect

    async with connect(url, open_timeout=30, max_size=1 << 26) as ws:
        await ws.send(json.dumps({"type": "hello", "token": TOKEN, "features": ["append"]}))
        await ws.recv()  # ready
        await ws.send(json.dumps({"type": "message.send", "text": "go"}))
        received = 0
        while True:
            raw = await ws.recv()
            received += len(raw) + 10
            frame = json.loads(raw)
            if frame["type"] == "typing" and frame["on"] is False:
                return received


def poll_health(url: str, stop: threading.Event, samples: list[float], sent: list[int]) -> None:
    """``/health`` every 10 ms; ``sent`` gets the bytes of each answer (the server's socket
    writes count in its ``wchar``, so they are taken off the log's bytes)."""
    with httpx.Client(timeout=30) as client:
        while not stop.is_set():
            started = time.monotonic()
            response = client.get(f"{url}/health")
            samples.append(time.monotonic() - started)
            head = sum(len(name) + len(value) + 4 for name, value in response.headers.raw)
            sent.append(len(b"HTTP/1.1 200 OK\r\n\r\n") + head + len(response.content))
            time.sleep(0.01)


def bench(size: int, rate: float, kind: str, redis: Any) -> tuple[float, list[float]]:
    deltas = max(1, size // WORD)
    with tempfile.TemporaryDirectory() as tmp:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        times = os.path.join(tmp, "times.json")
        redis_url = redis.url if kind == "redis" else ""
        child = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(port), "--deltas", str(deltas),
             "--rate", str(rate), "--times", times, "--db", os.path.join(tmp, "i.db"),
             "--redis", redis_url]
        )  # fmt: skip
        try:
            asyncio.run(wait_port(f"ws://127.0.0.1:{port}/iris/ws"))
            probe = redis.client() if kind == "redis" else None
            before = (
                int(probe.info("stats")["total_net_input_bytes"]) if probe else wchar(child.pid)
            )
            stop, samples, health = threading.Event(), list[float](), list[int]()
            poller = threading.Thread(
                target=poll_health, args=(f"http://127.0.0.1:{port}", stop, samples, health)
            )
            poller.start()
            received = asyncio.run(one_reply(f"ws://127.0.0.1:{port}/iris/ws"))
            time.sleep(0.5)  # the log's last batch
            stop.set()
            poller.join()
            if probe is not None:
                written = int(probe.info("stats")["total_net_input_bytes"]) - before
                probe.close()
            else:
                written = wchar(child.pid) - before - received - sum(health)
            return written / size, samples
        finally:
            child.terminate()
            child.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="2000,20000,200000")
    parser.add_argument("--rate", type=float, default=20_000.0, help="4-character deltas / s")
    parser.add_argument("--stores", default="sqlite,redis")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--deltas", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--times", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--redis", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.deltas, args.rate, args.times, args.db, args.redis)
        return
    from tests.scale.conftest import RedisServer

    class Unpersisted(RedisServer):
        """The tests' redis-server without the AOF: this measures the log, not fsync."""

        def start(self) -> None:
            import shutil

            server = shutil.which("redis-server")
            assert server is not None, "redis-server is not installed"
            self.process = subprocess.Popen(
                [server, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(self.directory)],
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
            client = self.client()
            for _ in range(500):
                try:
                    client.ping()
                    break
                except Exception:
                    time.sleep(0.02)
            client.close()

    for kind in args.stores.split(","):
        redis = None
        directory = tempfile.mkdtemp()
        if kind == "redis":
            redis = Unpersisted(Path(directory))
            redis.start()
        try:
            for size in (int(s) for s in args.sizes.split(",")):
                per_char, samples = bench(size, args.rate, kind, redis)
                samples = samples or [float("nan")]  # a reply shorter than the first poll
                print(
                    f"{kind:6} {size:>7} chars: {per_char:8.1f} bytes written per character; "
                    f"/health {len(samples)} answers, p50 {percentile(samples, 50) * 1000:.1f} ms,"
                    f" p99 {percentile(samples, 99) * 1000:.1f} ms",
                    flush=True,
                )
        finally:
            if redis is not None:
                redis.kill()


if __name__ == "__main__":
    main()

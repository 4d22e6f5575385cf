"""Soak: minutes of mixed, partly hostile load on one ``iris serve``; does it stay whole?

Runs the real server (its own process) against the raw fake upstream of ``api_overhead.py``
(each reply: ``--chunks`` stamped chunks at ``--rate`` per second) and, for ``--minutes``,
keeps these going at once:

- API streams (raw SSE clients, every chunk counted: a reply is whole or it is an error);
- slow readers: streams that read a little, stall, then leave mid-reply;
- iris devices, each on its own chat: send, follow the turn, sometimes drop the socket
  mid-reply and come back with ``resume`` — every reply must end with one ``message.stop``
  whose text holds exactly ``--chunks`` stamps (none lost, none doubled);
- bad input: garbage frames, unknown types, oversized text, a deep JSON body, text/plain
  POSTs, wrong keys — each must be refused cleanly.

It samples the server's RSS each second and prints requests served, errors by kind, peak RSS,
RSS growth after the warm-up (the first fifth of the run), and open files at the start and
after the load stopped. Targets: RSS growth < 10 % after warm-up, open files back to the
baseline, zero lost or duplicated replies.

    python bench/soak.py [--minutes 2] [--streams 8] [--devices 6]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from api_overhead import (  # noqa: E402 - the bench directory is not a package
    MODEL,
    ROOT,
    free_port,
    read_stream,
    start_upstream,
    wait_port,
)

KEY = "sk-soak"
TOKEN = "soak-device-token-0123"
DEVICE_TOKENS = [f"{TOKEN}-{n}" for n in range(64)]  # one per device (at most 64 devices)


def start_iris(upstream_port: int, workdir: Path) -> tuple[int, Any]:
    import subprocess

    port = free_port()
    config = workdir / "iris.yaml"
    config.write_text(
        json.dumps(
            {
                "server": {"host": "127.0.0.1", "port": port},
                "model": {
                    "provider": "chat_completions",
                    "base_url": f"http://127.0.0.1:{upstream_port}/v1",
                    "name": MODEL,
                    "api_key": "sk-bench",
                },
                "streaming": {"enabled": True},
                "platforms": {
                    "iris": {"enabled": True, "tokens": [TOKEN, *DEVICE_TOKENS]},
                    "api_server": {"max_concurrent": 64, "api_key": KEY},
                },
                "tools": {"enabled": []},
                "store": {"path": str(workdir / "iris.db")},
            }
        )
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "iris.cli", "serve", "--config", str(config)],
        env={**os.environ, "HOME": str(workdir)},
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        cwd=ROOT,
    )
    wait_port(port, process)
    return port, process


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Tally:
    def __init__(self) -> None:
        self.served: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()

    def ok(self, kind: str) -> None:
        self.served[kind] += 1

    def error(self, kind: str) -> None:
        self.errors[kind] += 1


# -- the load ------------------------------------------------------------------------------


async def api_streams(port: int, chunks: int, stop: float, tally: Tally) -> None:
    headers = {"authorization": f"Bearer {KEY}"}
    while time.monotonic() < stop:
        result = await read_stream(port, "/v1/chat/completions", chunks, headers)
        if result.error is None:
            tally.ok("api stream")
        else:
            tally.error(f"api stream: {result.error[:60]}")


async def slow_readers(port: int, stop: float, tally: Tally) -> None:
    body = json.dumps(
        {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "go"}]}
    ).encode()
    while time.monotonic() < stop:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            (
                f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
                f"authorization: Bearer {KEY}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        await writer.drain()
        with contextlib.suppress(Exception):
            await reader.read(200)  # the head and a chunk or two
            await asyncio.sleep(random.uniform(0.5, 2.0))  # stall: the server must not wait
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
        tally.ok("slow reader left")


async def _follow(ws: Any, message_ids: dict[str, str], until_off: bool = True) -> None:
    """Read frames until ``typing {on:false}``; keep the final text of each message."""
    while True:
        frame = json.loads(await ws.recv())
        kind = frame.get("type")
        if kind == "message.stop":
            if frame["message_id"] in message_ids:
                message_ids[frame["message_id"] + "#dup"] = frame["final_text"]
            message_ids[frame["message_id"]] = frame["final_text"]
        elif kind == "error" and frame.get("code") in _REFUSALS:
            # Connection-scoped: no turn started for this message, none will end.
            message_ids["refused:" + frame["code"]] = frame.get("message", "")
            return
        elif kind == "error":
            message_ids["error:" + frame.get("code", "?")] = frame.get("message", "")
        elif kind == "sync":
            for message in frame.get("messages", []):
                if message.get("role") == "assistant" and message["message_id"] not in message_ids:
                    message_ids[message["message_id"]] = message["text"]
        if until_off and kind == "typing" and frame.get("on") is False:
            return


_REFUSALS = ("busy", "turn_active", "rate_limited")


async def device(n: int, port: int, chunks: int, stop: float, tally: Tally) -> None:
    from websockets.asyncio.client import connect

    url = f"ws://127.0.0.1:{port}/iris/ws"
    chat = f"soak-{n}"
    token = f"{TOKEN}-{n}"  # a device of its own: platforms.iris.max_turns_per_token is per token
    turn = 0
    while time.monotonic() < stop:
        turn += 1
        stage = "connect"
        ws: Any = None
        try:
            ws = await connect(url, open_timeout=10, max_size=1 << 22)
            await ws.send(json.dumps({"type": "hello", "token": token, "chat_id": chat}))
            ready = json.loads(await ws.recv())
            last_seq = int(ready.get("seq") or 0)
            await ws.send(json.dumps({"type": "message.send", "text": f"turn {turn}"}))
            finals: dict[str, str] = {}
            stage = "turn"
            if random.random() < 0.3:
                stage = "resume"
                # Drop mid-reply, come back with resume from the last seq seen.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.1):
                        while True:
                            frame = json.loads(await ws.recv())
                            last_seq = max(last_seq, int(frame.get("seq") or 0))
                await ws.close()
                ws = await connect(url, open_timeout=10, max_size=1 << 22)
                hello = {"type": "hello", "token": token, "chat_id": chat, "after_seq": last_seq}
                await ws.send(json.dumps(hello))
                tally.ok("device resumed")
            async with asyncio.timeout(60):
                await _follow(ws, finals)
            await ws.close()
        except Exception as exc:  # noqa: BLE001 - every failure is a figure here
            tally.error(f"device ({stage}): {type(exc).__name__}")
            await asyncio.sleep(0.2)
            continue
        finally:
            if ws is not None:
                await ws.close()
        replies = [text for key, text in finals.items() if ":" not in key]
        errors = [key for key in finals if key.startswith("error:")]
        refused = [key for key in finals if key.startswith("refused:")]
        if refused:
            tally.ok(f"device {refused[0]}")
        elif errors:
            tally.error(f"device turn {errors[0]}")
        elif any(key.endswith("#dup") for key in finals):
            tally.error("device: duplicated reply")
        elif len(replies) != 1 or replies[0].count("[") != chunks:
            tally.error("device: lost or partial reply")
        else:
            tally.ok("device reply whole")


async def bad_input(port: int, stop: float, tally: Tally) -> None:
    import httpx
    from websockets.asyncio.client import connect

    url = f"http://127.0.0.1:{port}"
    deep = b"[" * 100_000 + b"]" * 100_000
    async with httpx.AsyncClient(timeout=10) as client:
        while time.monotonic() < stop:
            checks: list[tuple[str, Any]] = [
                ("deep json", client.post(f"{url}/v1/chat/completions", content=deep,
                 headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"})),
                ("text/plain post", client.post(f"{url}/v1/chat/completions", content=b"{}",
                 headers={"authorization": f"Bearer {KEY}", "content-type": "text/plain"})),
                ("wrong key", client.post(f"{url}/v1/chat/completions", json={},
                 headers={"authorization": "Bearer nope"})),
            ]  # fmt: skip
            for kind, call in checks:
                try:
                    response = await call
                    ok = 400 <= response.status_code < 500 and response.json().get("error")
                    (tally.ok if ok else tally.error)(f"refused: {kind}")
                except Exception as exc:  # noqa: BLE001
                    tally.error(f"bad input {kind}: {type(exc).__name__}")
            try:
                ws = await connect(f"ws://127.0.0.1:{port}/iris/ws", open_timeout=10)
                await ws.send(json.dumps({"type": "hello", "token": TOKEN, "chat_id": "bad"}))
                await ws.recv()
                for frame in ("{", '{"type": 3}', '{"type": "nope"}', '{"type": "ping"}'):
                    await ws.send(frame)
                    answer = json.loads(await ws.recv())
                    if answer["type"] not in ("error", "pong"):
                        tally.error("bad frame: unexpected answer")
                await ws.close()
                tally.ok("refused: bad frames")
            except Exception as exc:  # noqa: BLE001
                tally.error(f"bad frames: {type(exc).__name__}")
            await asyncio.sleep(0.5)


async def sample(pid: int, stop: float, samples: list[tuple[float, int]]) -> None:
    while time.monotonic() < stop:
        samples.append((time.monotonic(), rss_kib(pid)))
        await asyncio.sleep(1.0)


async def run(args: argparse.Namespace) -> None:
    upstream_port, upstream = start_upstream(args.chunks, args.rate)
    with tempfile.TemporaryDirectory() as tmp:
        port, iris = start_iris(upstream_port, Path(tmp))
        try:
            await asyncio.sleep(1.0)
            files_before = open_files(iris.pid)
            tally = Tally()
            samples: list[tuple[float, int]] = []
            begin = time.monotonic()
            stop = begin + args.minutes * 60
            tasks = [
                *(api_streams(port, args.chunks, stop, tally) for _ in range(args.streams)),
                *(slow_readers(port, stop, tally) for _ in range(2)),
                *(device(n, port, args.chunks, stop, tally) for n in range(args.devices)),
                bad_input(port, stop, tally),
                sample(iris.pid, stop, samples),
            ]
            await asyncio.gather(*tasks)
            # Let the server close what the load left: idle keep-alive connections last
            # server.timeout_keep_alive (5 s).
            await asyncio.sleep(8.0)
            files_after = open_files(iris.pid)
            alive = iris.poll() is None
        finally:
            iris.terminate()
            iris.wait(10)
            upstream.terminate()
            upstream.wait(10)
    warm = begin + args.minutes * 60 / 5
    after_warm = [rss for at, rss in samples if at >= warm] or [samples[-1][1]]
    peak = max(rss for _, rss in samples)
    growth = (after_warm[-1] - after_warm[0]) / after_warm[0] * 100
    print(f"soak: {args.minutes:g} min, {args.streams} API streams, {args.devices} iris devices")
    print(f"server alive at the end: {alive}")
    print("served:")
    for kind, count in sorted(tally.served.items()):
        print(f"  {kind:<28} {count}")
    print(f"errors: {sum(tally.errors.values())}")
    for kind, count in sorted(tally.errors.items()):
        print(f"  {kind:<28} {count}")
    print(
        f"RSS: peak {peak / 1024:.1f} MiB; after warm-up {after_warm[0] / 1024:.1f} → "
        f"{after_warm[-1] / 1024:.1f} MiB ({growth:+.1f} %, target < 10 %)"
    )
    print(f"open files: {files_before} at start, {files_after} after the load (target: equal)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--devices", type=int, default=6, choices=range(1, 65), metavar="1-64")
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--rate", type=float, default=200.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

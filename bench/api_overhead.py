"""Per-chunk delay a proxy adds to a token stream: direct vs Iris (vs LiteLLM when installed).

A raw-asyncio fake upstream (its own process) streams chat-completion chunks at a fixed rate,
each carrying the ``time.monotonic_ns()`` it was written at (CLOCK_MONOTONIC: one clock for
every process on the machine). A light client (raw sockets and SSE lines, not the SDK, so the
client is not the bottleneck) reads the streams and records, per chunk, receive time minus
send time. The same run measures:

- direct: client → upstream;
- iris:   client → ``iris serve`` (its own process) → upstream;
- iris+m: the same with ``server.metrics`` on (a second ``iris serve``, same run): what
  recording the Prometheus series costs, printed as "metrics add" (its p50/p99 minus iris's);
- litellm: client → LiteLLM proxy (one worker) → upstream, when a side environment has it
  (``--litellm /path/to/venv/bin/litellm`` or ``$LITELLM_BIN``; never in Iris's environment).

and prints, at 1 stream, at N (20) and at M (100) concurrent streams, each path's p50/p99 chunk
delay, what the proxy adds over direct (its percentile minus the direct path's), the proxy's CPU
use (% of one core, from /proc: near 100 % it saturates), the p50/p99 time from a request's
write to its first chunk (``1st``: at a burst of starts, the chunk delay counts from when the
request reached the upstream, so a proxy that sets requests up faster can show a higher chunk
delay and a lower ``1st``) and the errors (failed or incomplete streams).

    python bench/api_overhead.py [--chunks 100] [--rate 100] [--concurrent 20] [--many 100]

Targets for Iris on 2 cores: adds p50 < 1 ms and p99 < 5 ms at 1 stream; p99 < 50 ms at
20 × 100 chunks/s with zero errors; zero errors at 100 streams; metrics add p50 < 0.1 ms at 20.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sse_upstream import Events, serve  # noqa: E402 - the bench directory is not a package

ROOT = Path(__file__).resolve().parent.parent
MODEL = "bench-model"


# -- the fake upstream (runs in its own process: ``--upstream PORT``) ---------------------


def chat_chunks(chunks: int) -> Events:
    """A chat-completion stream of ``chunks`` content chunks, each carrying the
    ``time.monotonic_ns()`` it was made at (``sse_upstream`` makes an event when it is due)."""

    def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
        return {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def data(obj: dict[str, object]) -> bytes:
        return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n".encode()

    def events(path: str, body: dict[str, Any]) -> Iterator[bytes]:
        yield data(chunk({"role": "assistant", "content": ""}))
        for _ in range(chunks):
            yield data(chunk({"content": f"[{time.monotonic_ns()}]"}))
        yield data(chunk({}, "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 1, "completion_tokens": chunks, "total_tokens": chunks + 1}
            yield data({**chunk({}), "choices": [], "usage": usage})
        yield b"data: [DONE]\n\n"

    return events


# -- the light client ---------------------------------------------------------------------


@dataclass
class StreamResult:
    delays_ms: list[float] = field(default_factory=list[float])
    error: str | None = None
    # From the request's write to its first content chunk: what a user waits for the first
    # token (a faster proxy may show a higher chunk delay at a burst of starts: the upstream's
    # clock starts when the request reaches it, and this counts from when the client sent it).
    first_ms: float | None = None


async def read_stream(port: int, path: str, chunks: int, headers: dict[str, str]) -> StreamResult:
    result = StreamResult()
    body = json.dumps(
        {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "go"}]}
    ).encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"{extra}content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        result.error = f"connect: {exc}"
        return result
    try:
        asked = time.monotonic_ns()
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = head.split(b" ", 2)[1]
        if status != b"200":
            result.error = f"HTTP {status.decode()}"
            return result
        chunked = b"transfer-encoding: chunked" in head.lower()
        buffer = b""
        done = False
        while not done:
            if chunked:
                size = int((await reader.readline()).strip() or b"0", 16)
                if size == 0:
                    break
                data = await reader.readexactly(size + 2)
                buffer += data[:-2]
            else:
                data = await reader.read(65536)
                if not data:
                    break
                buffer += data
            now = time.monotonic_ns()
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if not line.startswith(b"data: "):
                        continue
                    payload = line[6:]
                    if payload == b"[DONE]":
                        done = True
                        break
                    # Find the stamp without a JSON parse: the client must stay light.
                    start = payload.find(b'"content":"[')
                    if start >= 0:
                        end = payload.index(b"]", start)
                        sent = int(payload[start + 12 : end])
                        if result.first_ms is None:
                            result.first_ms = (now - asked) / 1e6
                        result.delays_ms.append((now - sent) / 1e6)
        if not done:
            result.error = "stream ended without [DONE]"
        elif len(result.delays_ms) != chunks:
            result.error = f"{len(result.delays_ms)} of {chunks} chunks"
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return result


# -- processes ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def start_upstream(chunks: int, rate: float) -> tuple[int, subprocess.Popen[bytes]]:
    port = free_port()
    args = [sys.executable, __file__, "--upstream", str(port), "--chunks", str(chunks)]
    process = subprocess.Popen([*args, "--rate", str(rate)])
    wait_port(port, process)
    return port, process


def start_iris(
    upstream_port: int,
    workdir: Path,
    streams: int,
    *,
    name: str = "iris",
    args: tuple[str, ...] = (),
    launcher: tuple[str, ...] = (),
    **sections: dict[str, object],
) -> tuple[int, subprocess.Popen[bytes]]:
    """``iris serve`` whose turn limits admit ``streams`` at once (the bench measures delay,
    not the limiter's 429s). ``sections`` are merged over its config one level deep (e.g.
    ``store={"url": ...}``); ``args`` go to ``iris serve`` (``--workers 2``); ``launcher``
    goes to Python before ``-m iris.cli`` (``-m cProfile -o FILE``)."""
    # Imported here, not at the top: the upstream subprocess runs this file too and stays light.
    from iris.config import ServerConfig

    port = free_port()
    server: dict[str, object] = {"host": "127.0.0.1", "port": port}
    if "max_turns" in ServerConfig.model_fields:  # the global turn limit, where it exists
        server["max_turns"] = streams
    data: dict[str, dict[str, object]] = {
        "server": server,
        "model": {
            "provider": "chat_completions",
            "base_url": f"http://127.0.0.1:{upstream_port}/v1",
            "name": MODEL,
            "api_key": "sk-bench-key-0123456789",
        },
        "platforms": {
            "iris": {"enabled": False},
            "api_server": {"max_concurrent": streams, "api_key": "sk-bench-key-0123456789"},
        },
        "tools": {"enabled": []},
        "store": {"path": str(workdir / f"{name}.db")},
    }
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    config = workdir / f"{name}.yaml"
    config.write_text(json.dumps(data))  # JSON is YAML
    env = {**os.environ, "HOME": str(workdir)}
    process = subprocess.Popen(
        [sys.executable, *launcher, "-m", "iris.cli", "serve", "--config", str(config), *args],
        env=env,
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        cwd=ROOT,
    )
    wait_port(port, process)
    return port, process


def start_litellm(
    binary: str, upstream_port: int, workdir: Path
) -> tuple[int, subprocess.Popen[bytes]]:
    port = free_port()
    config = workdir / "litellm.yaml"
    config.write_text(
        json.dumps(
            {
                "model_list": [
                    {
                        "model_name": MODEL,
                        "litellm_params": {
                            "model": f"openai/{MODEL}",
                            "api_base": f"http://127.0.0.1:{upstream_port}/v1",
                            "api_key": "sk-bench-key-0123456789",
                        },
                    }
                ],
                # LiteLLM refuses to start without one; both proxies check the same key.
                "general_settings": {"master_key": "sk-bench-key-0123456789"},
            }
        )
    )
    process = subprocess.Popen(
        [binary, "--config", str(config), "--port", str(port), "--num_workers", "1"],
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    wait_port(port, process, timeout=120)
    return port, process


# -- the measurement ----------------------------------------------------------------------


def scraped_turns(port: int) -> str:
    """``iris_turns_started_total`` from a scrape: the metered server did record."""
    request = (
        f"GET /metrics HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        "authorization: Bearer sk-bench-key-0123456789\r\nconnection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), 5) as sock:
        sock.sendall(request.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    total = 0.0
    for line in answer.decode(errors="replace").splitlines():
        if line.startswith("iris_turns_started_total"):
            total += float(line.rsplit(" ", 1)[1])
    return f"{total:g}"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(
    port: int,
    path: str,
    streams: int,
    chunks: int,
    repeat: int = 1,
    firsts: list[float] | None = None,
) -> tuple[list[float], list[str]]:
    """(every chunk's delay, the errors); each stream's time to its first chunk to ``firsts``."""
    delays: list[float] = []
    errors: list[str] = []
    for _ in range(repeat):
        results = await asyncio.gather(
            *(
                read_stream(port, path, chunks, {"authorization": "Bearer sk-bench-key-0123456789"})
                for _ in range(streams)
            )
        )
        for result in results:
            delays.extend(result.delays_ms)
            if firsts is not None and result.first_ms is not None:
                firsts.append(result.first_ms)
            if result.error:
                errors.append(result.error)
    return delays, errors


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux ``/proc``), to show when a proxy saturates."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def timed(
    pid: int | None, work: Awaitable[tuple[list[float], list[str]]]
) -> tuple[list[float], list[str], float]:
    """``work``'s result and the proxy's CPU use during it, in % of one core."""
    cpu, wall = cpu_seconds(pid) if pid else 0.0, time.monotonic()
    delays, errors = await work
    used = (cpu_seconds(pid) - cpu) / (time.monotonic() - wall) * 100 if pid else float("nan")
    return delays, errors, used


def recording_cost() -> None:
    """What recording adds per chunk, measured alone (CPU time, no network, no neighbours'
    noise): the turn observer's look at a text delta, an iris frame counted, a turn's end
    recorded, with metrics off and on."""
    import timeit

    from iris.events import TextDelta, TurnEnded, TurnStarted
    from iris.observability import metrics
    from iris.observability.turns import TurnWatch

    delta = TextDelta("tok ")
    print("\nrecording cost, in-process (µs per call; best of 5)")
    for on in (False, True):
        metrics.enable(on)
        watch = TurnWatch("turn_bench", {"surface": "api"}, [MODEL], [])
        watch.saw(TurnStarted("turn_bench", MODEL))
        watch.saw(delta)  # the first one is timed; the rest are what a stream is made of

        def turn() -> None:
            w = TurnWatch("turn_b", {"surface": "api"}, [MODEL], [])
            w.saw(TurnStarted("turn_b", MODEL))
            w.saw(delta)
            w.saw(TurnEnded("x", model=MODEL, usage={"output_tokens": 5}))

        logger = __import__("logging").getLogger("iris.turns")
        logger.disabled = True  # the log line's cost is not the metrics'
        chunk = min(timeit.repeat(lambda w=watch: w.saw(delta), number=100_000, repeat=5)) * 10
        frame = min(
            timeit.repeat(
                lambda: metrics.frame_sent("message.update", '{"t":1}'), number=100_000, repeat=5
            )
        )
        whole = min(timeit.repeat(turn, number=2_000, repeat=5)) / 2_000 * 1e6
        logger.disabled = False
        print(
            f"  metrics {'on ' if on else 'off'}: per text delta {chunk:.3f}, "
            f"per iris frame {frame * 10:.3f}, per turn (start, first token, end) {whole:.1f}"
        )
    metrics.enable(False)


def report(
    label: str,
    paths: dict[str, tuple[list[float], list[str], float]],
    firsts: dict[str, list[float]],
) -> None:
    direct = paths["direct"][0]
    d50, d99 = percentile(direct, 0.5), percentile(direct, 0.99)
    print(f"\n{label}")
    print(
        f"  {'path':<8} {'chunks':>7} {'p50 ms':>8} {'p99 ms':>8} {'adds p50':>9} "
        f"{'adds p99':>9} {'proxy cpu':>10} {'1st p50':>8} {'1st p99':>8}  errors"
    )
    for name, (delays, errors, cpu) in paths.items():
        p50, p99 = percentile(delays, 0.5), percentile(delays, 0.99)
        adds = "" if name == "direct" else f"{p50 - d50:9.2f} {p99 - d99:9.2f}"
        load = "" if name == "direct" else f"{cpu:9.0f}%"
        first = firsts.get(name, [])
        waits = f"{percentile(first, 0.5):8.1f} {percentile(first, 0.99):8.1f}"
        shown = f"{len(errors)}" + (f" ({errors[0]})" if errors else "")
        print(
            f"  {name:<8} {len(delays):>7} {p50:8.2f} {p99:8.2f} {adds:>19} {load:>10} "
            f"{waits}  {shown}"
        )
    if "iris" in paths and "iris+m" in paths:
        off, on = paths["iris"][0], paths["iris+m"][0]
        print(
            f"  metrics add p50 {percentile(on, 0.5) - percentile(off, 0.5):+.3f} ms, "
            f"p99 {percentile(on, 0.99) - percentile(off, 0.99):+.3f} ms"
        )


async def run(args: argparse.Namespace) -> None:
    up_port, upstream = start_upstream(args.chunks, args.rate)
    processes = [upstream]
    targets: dict[str, tuple[int, str]] = {"direct": (up_port, "/v1/chat/completions")}
    pids: dict[str, int | None] = {"direct": None}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            iris_port, iris = start_iris(up_port, Path(tmp), max(args.concurrent, args.many))
            processes.append(iris)
            targets["iris"] = (iris_port, "/v1/chat/completions")
            pids["iris"] = iris.pid
            metered_port, metered = start_iris(
                up_port,
                Path(tmp),
                max(args.concurrent, args.many),
                name="iris-metrics",
                server={"metrics": {"enabled": True, "token": "sk-bench-key-0123456789"}},
            )
            processes.append(metered)
            targets["iris+m"] = (metered_port, "/v1/chat/completions")
            pids["iris+m"] = metered.pid
            litellm = args.litellm or os.environ.get("LITELLM_BIN") or shutil.which("litellm")
            if litellm:
                lite_port, lite = start_litellm(litellm, up_port, Path(tmp))
                processes.append(lite)
                targets["litellm"] = (lite_port, "/v1/chat/completions")
                pids["litellm"] = lite.pid
            else:
                print("LiteLLM: not installed (pass --litellm /venv/bin/litellm); skipped")
            for port, path in targets.values():  # warm up connections, imports, caches
                await measure(port, path, 2, args.chunks)
            print(f"{args.chunks} chunks per stream at {args.rate:g} chunks/s")
            firsts: dict[str, list[float]] = {name: [] for name in targets}
            single = {
                name: await timed(
                    pids[name], measure(port, path, 1, args.chunks, args.repeat, firsts[name])
                )
                for name, (port, path) in targets.items()
            }
            report(f"1 stream (x{args.repeat} runs)", single, firsts)
            for streams in (args.concurrent, args.many):
                # Rounds alternate between the paths, so a neighbour's load on a shared machine
                # falls on each of them alike.
                many: dict[str, tuple[list[float], list[str], float]] = {}
                firsts = {name: [] for name in targets}
                for _ in range(args.rounds):
                    for name, (port, path) in targets.items():
                        delays, errors, cpu = await timed(
                            pids[name], measure(port, path, streams, args.chunks, 1, firsts[name])
                        )
                        pooled, failed, used = many.get(name, ([], [], 0.0))
                        many[name] = (pooled + delays, failed + errors, used + cpu / args.rounds)
                report(f"{streams} concurrent streams (x{args.rounds} rounds)", many, firsts)
            print(f"\niris+m counted {scraped_turns(metered_port)} turns (GET /metrics)")
            recording_cost()
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--rate", type=float, default=100.0, help="chunks per second per stream")
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--many", type=int, default=100, help="streams in the heaviest row")
    parser.add_argument("--repeat", type=int, default=5, help="single-stream runs")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each concurrent row")
    parser.add_argument("--litellm", default=None, help="path to a side venv's litellm binary")
    parser.add_argument("--upstream", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream is not None:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(args.upstream, chat_chunks(args.chunks), args.rate, MODEL))
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()

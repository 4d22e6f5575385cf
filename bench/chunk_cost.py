"""CPU time an ``iris serve`` process spends per proxied chunk, from its own rusage.

A raw-asyncio fake upstream (its own process) streams ``--chunks`` model-output events per
request at ``--rate`` per second, in the official wire formats (the test fakes' encoders:
``tests/fakes/scenarios.py``): Chat Completions chunks or Responses events, text deltas or
tool-call argument deltas (the client sends a function, so Iris passes the call through). A
light client (raw sockets, no SDK, no JSON parse) opens 1, 50 and 200 streams at once and
counts the chunks that reach it. The figure is the server's user + system CPU time
(``/proc/<pid>/stat``) over the run divided by the chunks delivered: what the process itself
spent, whatever the neighbours on a shared machine do to wall-clock times. Each request's own
cost (its head, the turn's start and end) is in it too, spread over ``--chunks`` chunks.

Beside it, wake-ups per chunk: how often the server's threads were put on a CPU (after sleeping
in the event loop, or after another process had the CPU), and, once per run, what one
sleep/wake cycle of an idle process costs this machine in CPU. A wake-up costs the kernel's
switch and cold caches whatever the work (~26 µs on the 2-core VM this was written on), so the
figure is lowest where a wake-up finds many chunks (200 streams, a busy machine) and highest at
one stream.

Paths: ``chat`` is a client on ``/v1/chat/completions`` with a ``chat_completions`` provider,
``responses`` a client on ``/v1/responses`` with a ``responses`` provider; each with
``server.metrics`` off and on (``+m``). ``lean proxy`` is the floor: ``bench/lean_proxy.py``,
a protocol that parses each upstream line and writes a line, on the same loop and upstream
(Chat Completions text). Then the floor apart: Iris and the lean proxy, Chat Completions text at 50
streams, each at ``--chunks`` and at a tenth of it (the client asks the upstream for the count),
in alternating rounds, solved for what one request costs and what one more chunk costs, with
Iris's chunk over the proxy's. Then one more server runs under cProfile (50 streams, Chat
Completions text) and the profile's top 15 functions by own time are printed
(``CHUNK_COST_SORT=cumulative`` sorts them by cumulative time, ``CHUNK_COST_TOP=40``
prints more).

    python bench/chunk_cost.py [--chunks 200] [--rate 100] [--streams 1 50 200] [--no-profile]
        [--only chat] [--loop asyncio|uvloop] [--against OTHER/src [--rounds 4]]
        [--workers 2 [--rounds 4]]

``--against`` compares this checkout with another one's ``src`` (an older commit's, made with
``git archive``) instead: a server of each, text chunks at the largest ``--streams``, measured
in alternating rounds so both see the same neighbours; it prints each one's median and least
µs per chunk and their ratio (the CPU figure still moves with the machine's load, the ratio
much less).

``--workers N`` puts one process and ``iris serve --workers N`` on one Redis store (needs
``redis-server``) and measures the largest ``--streams`` through each, Chat Completions text, in
alternating rounds: the whole process tree's CPU per chunk, and each worker's share of it.
Wall-clock scale-out (``bench/scale_out.py``) needs cores the load generator does not take; on
a 2-core machine the fake upstream and the clients take one. CPU per chunk and the spread do
not: N cores carry at most ``1 / busiest share`` times one process's streams, less what a chunk
costs more in a worker.

Target: ≤ 50 µs per text chunk at 50 streams.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import pstats
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from api_overhead import free_port, start_iris, wait_port  # noqa: E402
from sse_upstream import serve  # noqa: E402

SRC = Path(__file__).resolve().parent.parent / "src"  # this checkout's, for --against
MODEL = "bench-model"
KEY = "sk-bench-key-0123456789"
TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}


# -- the fake upstream (its own process: ``--upstream PORT``) -----------------------------


def upstream_events(path: str, body: dict[str, Any], chunks: int) -> list[bytes]:
    """The SSE events of one answer, as the test fakes write them: ``chunks`` of them, or the
    count a ``chunks=N`` in the request asks for (the floor's short streams)."""
    from tests.fakes.scenarios import Received, text, tool_call

    asked = re.search(r"chunks=(\d+)", json.dumps(body))
    chunks = int(asked[1]) if asked else chunks
    if body.get("tools"):
        scenario = tool_call("lookup", ['{"q": "', *("ab" for _ in range(chunks - 2)), '"}'])
    else:
        scenario = text(*(f"tok{i} " for i in range(chunks)))
    reply = scenario.reply(Received("POST", path, body, {}, time.monotonic()))
    return [event.data for event in reply.events or ()]


# -- the light client ---------------------------------------------------------------------


def request_bytes(port: int, api: str, tools: bool, chunks: int | None = None) -> bytes:
    """The request of one stream; ``chunks`` asks the upstream for that many instead of its
    ``--chunks``."""
    body: dict[str, Any] = {"model": MODEL, "stream": True}
    ask = "go" if chunks is None else f"go chunks={chunks}"
    if api == "chat":
        path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": ask}]
        if tools:
            body["tools"] = [TOOL]
    else:
        path, body["input"] = "/v1/responses", ask
        if tools:
            body["tools"] = [{"type": "function", **TOOL["function"]}]
    data = json.dumps(body).encode()
    return (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"authorization: Bearer {KEY}\r\ncontent-length: {len(data)}\r\n"
        "connection: close\r\n\r\n"
    ).encode() + data


# What marks one proxied model-output chunk in what the client reads.
MARKS = {
    ("chat", False): b'"content":"tok',
    ("chat", True): b'"arguments":"',
    ("responses", False): b"event: response.output_text.delta",
    ("responses", True): b"event: response.function_call_arguments.delta",
}


async def read_stream(
    port: int, api: str, tools: bool, chunks: int | None = None
) -> tuple[int, str | None]:
    """(model-output chunks received, error or None). Reads to the end of the body."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return 0, f"connect: {exc}"
    seen, tail, mark = 0, b"", MARKS[(api, tools)]
    try:
        writer.write(request_bytes(port, api, tools, chunks))
        head = await reader.readuntil(b"\r\n\r\n")
        if head.split(b" ", 2)[1] != b"200":
            return 0, head.split(b"\r\n", 1)[0].decode()
        while data := await reader.read(65536):
            window = tail + data
            seen += window.count(mark)
            tail = data[-len(mark) + 1 :]  # a mark split between two reads counts once
        return seen, None
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        return seen, f"{type(exc).__name__}: {exc}"
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def cpu_ns(pid: int) -> tuple[int, int]:
    """The process's CPU time so far in ns, all its threads, and how many times its threads
    were put on a CPU (``/proc/<pid>/task/*/schedstat``: the scheduler's own counts, finer than
    ``stat``'s clock ticks; ``stat``'s utime + stime count the same time, 10 ms at a time)."""
    total = runs = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            fields = (task / "schedstat").read_text().split()
            total += int(fields[0])
            runs += int(fields[2])
    return total, runs


def wake_cost(cycles: int = 2000) -> float:
    """CPU µs this machine charges a process for one sleep/wake cycle with no work in it
    (``epoll_wait`` with a 1 ms timeout): the floor under a chunk that wakes the server."""
    import select

    poller = select.epoll()
    start = time.process_time()
    for _ in range(cycles):
        poller.poll(0.001)
    poller.close()
    return (time.process_time() - start) / cycles * 1e6


async def measure(
    pid: int, port: int, api: str, tools: bool, streams: int, chunks: int, asked: bool = False
) -> tuple[float, int, list[str], float]:
    """(CPU µs per proxied chunk, chunks the client saw, errors, wake-ups per chunk) of
    ``streams`` at once. A wake-up (the process put on a CPU after sleeping in its event loop,
    or after another process had the CPU) costs the kernel's switch and cold caches whatever
    the work: on a quiet machine each chunk may wake the server, on a busy one a wake-up finds
    several chunks waiting, so the CPU per chunk falls as the load rises. ``asked``: the
    streams ask the upstream for ``chunks`` (not its ``--chunks``)."""
    ask = chunks if asked else None
    before, runs = cpu_ns(pid)
    results = await asyncio.gather(*(read_stream(port, api, tools, ask) for _ in range(streams)))
    after, runs_after = cpu_ns(pid)
    errors = [error for _, error in results if error]
    delivered = streams * chunks
    cost = (after - before) / 1e3 / delivered
    return cost, sum(count for count, _ in results), errors, (runs_after - runs) / delivered


# -- the servers and the run --------------------------------------------------------------


def start_server(
    up_port: int, workdir: Path, args: argparse.Namespace, api: str, metrics: bool, name: str
) -> tuple[int, subprocess.Popen[bytes]]:
    model: dict[str, object] = {"provider": "chat_completions" if api == "chat" else "responses"}
    server: dict[str, object] = {"metrics": {"enabled": True, "token": KEY}} if metrics else {}
    launch = (__file__, "--serve-loop", args.loop) if args.loop else ()
    streams = max(args.streams)
    return start_iris(
        up_port, workdir, streams, name=name, launcher=launch, model=model, server=server
    )


async def one_path(
    up_port: int, workdir: Path, args: argparse.Namespace, api: str, metrics: bool
) -> None:
    label = api + ("+m" if metrics else "")
    port, server = start_server(up_port, workdir, args, api, metrics, label)
    try:
        for tools in (False, True):
            await rows(server.pid, port, label, api, tools, args)
    finally:
        stop(server)


async def rows(
    pid: int, port: int, label: str, api: str, tools: bool, args: argparse.Namespace
) -> None:
    """A warm-up (as many streams as the most measured: the server's connections to the
    upstream are kept alive, as under steady traffic), then one printed row per ``--streams``
    count."""
    await measure(pid, port, api, tools, max(args.streams), args.chunks)
    for streams in args.streams:
        cost, seen, errors, wakes = await measure(pid, port, api, tools, streams, args.chunks)
        shown = f"{len(errors)}" + (f" ({errors[0]})" if errors else "")
        kind = "tool" if tools else "text"
        print(
            f"  {label:<12} {kind:<5} {streams:>7} {cost:>11.1f} {wakes:>12.2f} {seen:>9}  {shown}",
            flush=True,
        )


def start_lean(up_port: int) -> tuple[int, subprocess.Popen[bytes]]:
    port = free_port()
    script = Path(__file__).resolve().parent / "lean_proxy.py"
    return port, subprocess.Popen([sys.executable, str(script), str(port), str(up_port)])


async def lean(up_port: int, args: argparse.Namespace) -> None:
    """The floor: ``bench/lean_proxy.py`` (parse a line, write a line) on the same upstream,
    Chat Completions text, measured the same way."""
    port, server = start_lean(up_port)
    try:
        wait_port(port, server)
        await rows(server.pid, port, "lean proxy", "chat", False, args)
    finally:
        stop(server)


async def floor(up_port: int, workdir: Path, args: argparse.Namespace) -> None:
    """Iris and the lean proxy, Chat Completions text at 50 streams (or the most measured),
    each at ``--chunks`` and at a tenth of it, in alternating rounds: the CPU of one request
    (its head, the turn's start and end, the upstream request) apart from the CPU of one more
    chunk, from the two lengths' medians (cost = request + chunks × chunk)."""
    import statistics

    streams = 50 if 50 in args.streams else max(args.streams)
    long, short = args.chunks, max(10, args.chunks // 10)
    if long <= short:
        print(f"\nno request/chunk split: it needs --chunks above {short}")
        return
    iris_port, iris = start_server(up_port, workdir, args, "chat", False, "floor")
    lean_port, proxy = start_lean(up_port)
    try:
        wait_port(lean_port, proxy)
        servers = {"iris": (iris.pid, iris_port), "lean proxy": (proxy.pid, lean_port)}
        costs = {(name, n): list[float]() for name in servers for n in (long, short)}
        for pid, port in servers.values():  # warm up
            await measure(pid, port, "chat", False, streams, long)
        for turn in range(3):
            for name, (pid, port) in list(servers.items())[:: 1 if turn % 2 else -1]:
                for n in (long, short):
                    cost = (await measure(pid, port, "chat", False, streams, n, asked=True))[0]
                    costs[name, n].append(cost)
    finally:
        stop(iris)
        stop(proxy)
    print(f"\nper request and per chunk (chat text, {streams} streams, {long} and {short} chunks "
          "a stream, medians of 3 rounds)")  # fmt: skip
    split: dict[str, tuple[float, float]] = {}
    for name in servers:
        at_long, at_short = (statistics.median(costs[name, n]) * n for n in (long, short))
        chunk = (at_long - at_short) / (long - short)
        split[name] = (at_short - chunk * short, chunk)
        print(f"  {name:<12} {split[name][0]:8.0f} µs a request  {chunk:6.1f} µs a chunk  "
              f"{at_long / long:6.1f} µs/chunk at {long} chunks")  # fmt: skip
    (iris_request, iris_chunk), (lean_request, lean_chunk) = split.values()
    print(f"  iris / lean proxy: {iris_chunk / lean_chunk:.2f}x a chunk, "
          f"{iris_request / lean_request:.1f}x a request; iris adds "
          f"{iris_chunk - lean_chunk:.1f} µs a chunk to the proxy's")  # fmt: skip


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def profile(up_port: int, workdir: Path, args: argparse.Namespace) -> None:
    """One more server, under cProfile for the measured run only (SIGUSR1 starts it, SIGUSR2
    writes it): 50 Chat Completions text streams; its top 15."""
    out = workdir / "serve.prof"
    launch = (__file__, "--serve-profiled", str(out))
    port, server = start_iris(up_port, workdir, 50, name="profiled", launcher=launch)
    try:
        await measure(server.pid, port, "chat", False, 50, args.chunks)  # warm up
        server.send_signal(signal.SIGUSR1)
        await measure(server.pid, port, "chat", False, 50, args.chunks)
        server.send_signal(signal.SIGUSR2)
        for _ in range(200):
            if out.exists():
                break
            await asyncio.sleep(0.05)
    finally:
        stop(server)
    print("\nprofile (cProfile, 50 chat text streams; top 15 by own time)")
    stats = pstats.Stats(str(out))
    stats.sort_stats(os.environ.get("CHUNK_COST_SORT", "tottime"))
    stats.print_stats(int(os.environ.get("CHUNK_COST_TOP", "15")))


def start_upstream(args: argparse.Namespace) -> tuple[int, subprocess.Popen[bytes]]:
    """The fake upstream in its own process, so its CPU is not the server's."""
    up_port = free_port()
    upstream = subprocess.Popen(
        [sys.executable, __file__, "--upstream", str(up_port), "--chunks", str(args.chunks)]
        + ["--rate", str(args.rate)]
    )
    wait_port(up_port, upstream)
    return up_port, upstream


async def compare(args: argparse.Namespace) -> None:
    """This checkout against ``args.against`` (another ``src``), alternating rounds."""
    import os
    import statistics

    up_port, upstream = start_upstream(args)
    streams = max(args.streams)
    trees = {"this": str(SRC), "other": args.against}
    print(f"{streams} streams, {args.chunks} chunks each at {args.rate:g}/s; other: {args.against}")
    print(f"one sleep/wake cycle of an idle process costs {wake_cost():.1f} µs CPU here")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for api in args.only or ("chat", "responses"):
                servers: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
                kept = os.environ.get("PYTHONPATH")
                try:
                    for name, tree in trees.items():
                        os.environ["PYTHONPATH"] = tree
                        servers[name] = start_server(up_port, Path(tmp), args, api, False, name)
                finally:
                    os.environ.pop("PYTHONPATH", None)
                    if kept is not None:
                        os.environ["PYTHONPATH"] = kept
                costs: dict[str, list[float]] = {name: [] for name in servers}
                wakes: dict[str, list[float]] = {name: [] for name in servers}
                try:
                    for port, server in servers.values():  # warm up (and fill the pool)
                        await measure(server.pid, port, api, False, streams, args.chunks)
                    for turn in range(args.rounds):
                        order = list(servers.items())
                        for name, (port, server) in order[:: 1 if turn % 2 else -1]:
                            cost, _, _, woken = await measure(
                                server.pid, port, api, False, streams, args.chunks
                            )
                            costs[name].append(cost)
                            wakes[name].append(woken)
                finally:
                    for _, server in servers.values():
                        stop(server)
                mine, theirs = (statistics.median(costs[name]) for name in ("this", "other"))
                load = os.getloadavg()[0]
                for name, values in costs.items():
                    print(f"  {api:<10} {name:<6} median {statistics.median(values):6.1f} "
                          f"least {min(values):6.1f} µs/chunk, "
                          f"{statistics.median(wakes[name]):.2f} wake-ups/chunk")  # fmt: skip
                print(f"  {api:<10} this / other: {mine / theirs:.2f} (load average {load:.1f})")
    finally:
        stop(upstream)


async def shares(
    pid: int, port: int, streams: int, chunks: int
) -> tuple[float, dict[int, float], int]:
    """``streams`` Chat Completions text streams through a server and its workers: (CPU µs per
    chunk of the whole tree, each process's share of that CPU, chunks the clients saw)."""
    from scale_out import children

    pids = [pid, *children(pid)]
    before = {p: cpu_ns(p)[0] for p in pids}
    results = await asyncio.gather(*(read_stream(port, "chat", False) for _ in range(streams)))
    spent = {p: cpu_ns(p)[0] - before[p] for p in pids}
    total = sum(spent.values())
    seen = sum(count for count, _ in results)
    return total / 1e3 / (streams * chunks), {p: n / total for p, n in spent.items()}, seen


async def spread(args: argparse.Namespace) -> None:
    """``--workers N``: one process and N workers on one Redis store, Chat Completions text at
    the largest ``--streams``, in alternating rounds. Per chunk, the whole tree's CPU (the
    supervisor's included), and how it fell on the workers: N cores carry at most
    1 / (the busiest worker's share) times what one process carries, less what a chunk costs
    more in a worker."""
    import statistics

    from scale_out import redis_server

    up_port, upstream = start_upstream(args)
    streams, count = max(args.streams), args.workers
    print(f"{streams} streams, {args.chunks} chunks each at {args.rate:g}/s; "
          f"1 process against --workers {count}, one Redis")  # fmt: skip
    try:
        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
            store: dict[str, object] = {"url": stack.enter_context(redis_server(Path(tmp)))}
            setups = {"1 process": (), f"--workers {count}": ("--workers", str(count))}
            servers = {
                name: start_iris(up_port, Path(tmp), streams, name=f"w{n}", args=extra, store=store)
                for n, (name, extra) in enumerate(setups.items())
            }
            costs: dict[str, list[float]] = {name: [] for name in servers}
            busiest: list[float] = []
            try:
                for port, server in servers.values():  # warm up (and fill the pools)
                    await shares(server.pid, port, streams, args.chunks)
                for turn in range(args.rounds):
                    order = list(servers.items())[:: 1 if turn % 2 else -1]
                    for name, (port, server) in order:
                        cost, split, seen = await shares(server.pid, port, streams, args.chunks)
                        costs[name].append(cost)
                        if name != "1 process":
                            # The N busiest children: the workers (a helper process idles).
                            workers = sorted(v for p, v in split.items() if p != server.pid)
                            workers = workers[-count:]
                            busiest.append(workers[-1] / (sum(workers) or 1))
                            parts = " / ".join(f"{100 * v:.0f} %" for v in reversed(workers))
                            print(f"  round {turn + 1}: the workers' CPU {parts}, "
                                  f"{seen} of {streams * args.chunks} chunks")  # fmt: skip
            finally:
                for _, server in servers.values():
                    stop(server)
        one, many = (statistics.median(costs[name]) for name in servers)
        for name, values in costs.items():
            print(f"  {name:<12} median {statistics.median(values):6.1f} "
                  f"least {min(values):6.1f} µs/chunk (the whole tree)")  # fmt: skip
        top = statistics.median(busiest)
        print(f"  a chunk costs {many / one:.2f}x in a worker; the busiest worker took "
              f"{100 * top:.0f} % (median): {count} cores carry at most "
              f"{one / many / top:.2f}x the streams of one process")  # fmt: skip
    finally:
        stop(upstream)


async def run(args: argparse.Namespace) -> None:
    if args.against:
        await compare(args)
        return
    if args.workers:
        await spread(args)
        return
    up_port, upstream = start_upstream(args)
    print(f"{args.chunks} chunks per stream at {args.rate:g} chunks/s; loop {args.loop or 'auto'}")
    print(f"one sleep/wake cycle of an idle process costs {wake_cost():.1f} µs CPU here")
    print(f"  {'path':<12} {'kind':<5} {'streams':>7} {'µs/chunk':>11} {'wakes/chunk':>12}"
          f" {'delivered':>9}  errors")  # fmt: skip
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for api in args.only or ("chat", "responses"):
                for metrics in (False, True):
                    await one_path(up_port, Path(tmp), args, api, metrics)
            if "chat" in (args.only or ("chat",)):
                await lean(up_port, args)
                await floor(up_port, Path(tmp), args)
            if args.profile:
                await profile(up_port, Path(tmp), args)
    finally:
        stop(upstream)


def serve_on(loop: str, argv: list[str]) -> None:
    """``iris serve`` (``argv``: ``-m iris.cli serve ...``) with uvicorn's ``loop`` forced."""
    import functools

    import uvicorn

    from iris.cli import main as iris_main

    uvicorn.run = functools.partial(uvicorn.run, loop=loop)
    sys.argv = ["iris", *argv[2:]]
    iris_main()


def serve_profiled(out: str, argv: list[str]) -> None:
    """``iris serve`` whose profiler runs from SIGUSR1 to SIGUSR2 (then written to ``out``)."""
    import cProfile

    from iris.cli import main as iris_main

    profiler = cProfile.Profile()
    signal.signal(signal.SIGUSR1, lambda *_: profiler.enable())

    def write(*_: object) -> None:
        profiler.disable()
        profiler.dump_stats(out)

    signal.signal(signal.SIGUSR2, write)
    sys.argv = ["iris", *argv[2:]]
    iris_main()


def main() -> None:
    if sys.argv[1:2] == ["--serve-loop"]:
        serve_on(sys.argv[2], sys.argv[3:])
        return
    if sys.argv[1:2] == ["--serve-profiled"]:
        serve_profiled(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chunks", type=int, default=200, help="model-output chunks a stream")
    parser.add_argument("--rate", type=float, default=100.0, help="chunks per second a stream")
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 50, 200])
    parser.add_argument("--only", nargs="+", choices=("chat", "responses"), default=None)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default=None)
    parser.add_argument("--no-profile", dest="profile", action="store_false")
    parser.add_argument("--against", default=None, help="another checkout's src to compare")
    parser.add_argument(
        "--rounds", type=int, default=4, help="--against, --workers: rounds of each"
    )
    parser.add_argument("--workers", type=int, default=0, help="1 process against N workers")
    parser.add_argument("--upstream", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream is not None:
        with contextlib.suppress(KeyboardInterrupt):
            events = functools.partial(upstream_events, chunks=args.chunks)
            asyncio.run(serve(args.upstream, events, args.rate, MODEL))
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()

"""How long ``/health`` waits while ``iris serve`` handles one very large conversation.

Starts the scripted fake upstream (tests/fakes) and a real ``iris serve`` subprocess, then
posts one Chat Completions request of N small messages (not streamed) while a second thread
asks ``/health`` over and over. Prints the big request's time and the ``/health`` latencies
seen during it. Before the upstream request was built off the event loop, 20 000 messages
froze the server for 3.4 s (issue 10, finding 4); the target is ``/health`` within 100 ms.

    python bench/loop_lag.py [--messages 20000] [--provider chat_completions|responses]
                             [--src DIR]   # measure another checkout's src/ (e.g. the old code)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.served import Served, free_port, write_config  # noqa: E402
from tests.fakes.upstream import FakeUpstream, text  # noqa: E402


def conversation(count: int) -> list[dict[str, str]]:
    roles = ("user", "assistant")
    head = [{"role": roles[i % 2], "content": f"message {i}"} for i in range(count - 1)]
    return [*head, {"role": "user", "content": "and now?"}]


def poll_health(url: str, stop: threading.Event, samples: list[float]) -> None:
    with httpx.Client(timeout=60) as client:
        while not stop.is_set():
            started = time.monotonic()
            client.get(f"{url}/health").raise_for_status()
            samples.append(time.monotonic() - started)
            time.sleep(0.01)


def run(args: argparse.Namespace) -> None:
    env = dict(os.environ)
    src = Path(args.src).resolve() if args.src else ROOT / "src"
    env["PYTHONPATH"] = str(src)
    body = json.dumps({"model": "fake-model", "messages": conversation(args.messages)}).encode()
    limits = {"max_body_bytes": max(len(body) * 2, 4 << 20)}
    if not args.src:  # an old checkout does not know the caps
        limits["max_messages"] = args.messages
    with FakeUpstream() as upstream, tempfile.TemporaryDirectory() as tmp:
        upstream.script(text("warm"), text("ok"))
        port = free_port()
        config = write_config(
            Path(tmp),
            upstream.base_url,
            port,
            model={"provider": args.provider},
            platforms={"iris": {"enabled": False}, "api_server": limits},
        )
        server = Served(config, env=env)
        try:
            server.wait_for("Application startup complete")
            url = f"http://127.0.0.1:{port}"
            httpx.get(f"{url}/health", timeout=5).raise_for_status()
            # One small request first: the provider client and the SDK's modules load once,
            # on the first request; this measures every request after that.
            small = {"model": "fake-model", "messages": conversation(1)}
            httpx.post(f"{url}/v1/chat/completions", json=small, timeout=30).raise_for_status()
            stop, samples = threading.Event(), list[float]()
            poller = threading.Thread(target=poll_health, args=(url, stop, samples))
            poller.start()
            time.sleep(0.2)  # a few samples of the idle server first
            idle = len(samples)
            started = time.monotonic()
            answer = httpx.post(
                f"{url}/v1/chat/completions",
                content=body,
                headers={"content-type": "application/json"},
                timeout=120,
            )
            took = time.monotonic() - started
            stop.set()
            poller.join()
        finally:
            server.stop()
    during = samples[idle:] or [float("nan")]
    print(
        f"{args.messages} messages ({len(body) / 1e6:.1f} MB), provider {args.provider}, "
        f"src {src}: HTTP {answer.status_code} in {took:.2f} s"
    )
    print(
        f"/health during it: {len(during)} answers, p50 {statistics.median(during) * 1000:.0f} ms, "
        f"max {max(during) * 1000:.0f} ms (idle p50 "
        f"{statistics.median(samples[:idle] or [float('nan')]) * 1000:.1f} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--provider", choices=["chat_completions", "responses"], default=None)
    parser.add_argument("--src", default=None, help="another checkout's src/ to measure")
    args = parser.parse_args()
    providers = [args.provider] if args.provider else ["chat_completions", "responses"]
    for provider in providers:
        args.provider = provider
        run(args)


if __name__ == "__main__":
    main()

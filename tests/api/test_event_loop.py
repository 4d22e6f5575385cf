"""A large conversation does not stop the server: the upstream request is built and encoded
off the event loop (issue 10, finding 4 — the SDK's typed ``create()`` transformed 20 000
messages on the loop for 3.4–3.9 s, and every other client waited)."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from tests.api.conftest import IrisServer, StartIris
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(60)

MESSAGES = 20_000


class LoopWatch:
    """A task on the server's loop that wakes every 10 ms and keeps the longest gap."""

    def __init__(self, server: IrisServer) -> None:
        assert server._loop is not None
        self._loop = server._loop
        self._stop = threading.Event()
        self.longest = 0.0
        self._future = asyncio.run_coroutine_threadsafe(self._watch(), self._loop)

    async def _watch(self) -> None:
        last = time.monotonic()
        while not self._stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            self.longest = max(self.longest, now - last - 0.01)
            last = now

    def stop(self) -> float:
        self._stop.set()
        self._future.result(5)
        return self.longest


def conversation(count: int) -> list[dict[str, str]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": f"message {i}"} for i in range(count - 1)] + [
        {"role": "user", "content": "and now?"}
    ]


@pytest.mark.parametrize("provider", ["chat_completions", "responses"])
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_a_20000_message_request_does_not_block_the_loop(
    iris_server: StartIris, upstream: FakeUpstream, provider: str, stream: bool
) -> None:
    server = iris_server(
        model={"provider": provider},
        streaming={"api_server": stream},
        platforms={"api_server": {"max_messages": MESSAGES, "max_body_bytes": 16 << 20}},
    )
    upstream.script(text("ok"))
    watch = LoopWatch(server)
    answer = httpx.post(
        f"{server.base_url}/chat/completions",
        json={"model": "fake-model", "messages": conversation(MESSAGES)},
        timeout=30,
    )
    longest = watch.stop()
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "ok"
    received = upstream.wait_for_request().body
    assert len(received["messages" if provider == "chat_completions" else "input"]) == MESSAGES
    # Generous for a shared 2-core machine running the suite's three workers (1.6 s was seen
    # there), and below what blocking cost on an idle one (3.4 s at this size; more under
    # load, so the regression this guards still fails it). bench/loop_lag.py prints the figure.
    assert longest < 2.5, f"the event loop stood still for {longest:.2f} s"

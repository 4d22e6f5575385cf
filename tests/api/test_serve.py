"""``iris serve`` as a user runs it: a subprocess that starts, answers /health, streams, and
shuts down cleanly on SIGTERM (exit 0) after letting an in-flight turn finish."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from openai import OpenAI

from tests.fakes.served import Served, free_port
from tests.fakes.upstream import FakeUpstream, gated, hold

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def served(tmp_path: Path, upstream: FakeUpstream) -> Iterator[tuple[Served, str]]:
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"host": "127.0.0.1", "port": port},
                "model": {"base_url": upstream.base_url, "name": "fake-model", "api_key": "sk"},
                "platforms": {"iris": {"enabled": False}},
                "store": {"path": str(tmp_path / "iris.db")},
            }
        )
    )
    server = Served(config)
    try:
        server.wait_for("Application startup complete")
        yield server, f"http://127.0.0.1:{port}"
    finally:
        if server.process.poll() is None:
            server.process.kill()
        server.process.wait(10)


def test_serve_answers_health_and_exits_0_on_sigterm(served: tuple[Served, str]) -> None:
    server, url = served
    with httpx.Client(timeout=10) as http:
        health = http.get(f"{url}/health").json()
    assert health["status"] == "ok" and health["model"] == "fake-model"
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(15) == 0


def test_sigterm_lets_an_in_flight_stream_finish(
    served: tuple[Served, str], upstream: FakeUpstream
) -> None:
    server, url = served
    upstream.script(gated("Hel", "lo", after=1))
    with OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=15) as client:
        stream = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        chunks = iter(stream)
        next(chunks)
        assert next(chunks).choices[0].delta.content == "Hel"
        server.process.send_signal(signal.SIGTERM)
        server.wait_for("Shutting down")
        upstream.release()
        rest = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert rest == "lo"
    assert server.process.wait(15) == 0


def test_a_public_bind_without_a_key_refuses_to_start(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"host": "0.0.0.0", "port": free_port()},
                "platforms": {"iris": {"enabled": False}},
                "store": {"path": str(tmp_path / "iris.db")},
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "iris.cli", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != 0
    assert "refusing to bind 0.0.0.0" in done.stderr
    assert "api_key" in done.stderr
    assert "Traceback" not in done.stderr


def test_sigterm_ends_a_stream_that_would_not_finish_cleanly(
    served: tuple[Served, str], upstream: FakeUpstream
) -> None:
    """After uvicorn's grace period the turn is interrupted: the client still gets its text so
    far, a finish chunk and [DONE] (no connection error), and the upstream is closed."""
    server, url = served
    upstream.script(hold("Hel"))
    with OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=20) as client:
        stream = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        chunks = iter(stream)
        next(chunks)
        assert next(chunks).choices[0].delta.content == "Hel"
        server.process.send_signal(signal.SIGTERM)
        rest = list(chunks)
    assert rest[-1].choices[0].finish_reason == "stop"
    assert server.process.wait(20) == 0
    assert upstream.disconnected.wait(5)  # the fake notices the closed socket on its own thread
    server.wait_for("Finished server process")
    assert not any("Traceback" in line for line in server.log)

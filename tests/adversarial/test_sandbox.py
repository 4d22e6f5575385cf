"""Issue 37: an approved ``terminal`` command tries to break out of its sandbox, against the real
``iris serve``. The escape that was found, step by step — Iris's command line and environment
in ``/proc/$PPID``, the config, Redis and the upstream on loopback, a ``setsid`` child outliving
the turn to reach the iris socket — and the other ways out. Each attempt must fail, and Iris
must go on serving the next request."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI

from tests.adversarial.conftest import StartServed
from tests.fakes.served import Served
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(90)

KEY = "sk-iris-sandbox-key-0123456789"
TOKEN = "device-token-sandbox-0123456789abcdef"
USER = [{"role": "user", "content": "hi"}]
TIMEOUT = 4  # tools.terminal.timeout of these servers, seconds


class FakeRedis:
    """A Redis stand-in on loopback: answers ``+PONG`` to whoever connects."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.sendall(b"+PONG\r\n")

    def close(self) -> None:
        self.sock.close()
        self._thread.join(5)


@pytest.fixture
def redis() -> Iterator[FakeRedis]:
    fake = FakeRedis()
    yield fake
    fake.close()


def start(served: StartServed, tmp_path: Path, **terminal: Any) -> tuple[Served, str]:
    return served(
        platforms={"api_server": {"api_key": KEY}, "iris": {"enabled": True, "tokens": [TOKEN]}},
        tools={
            "terminal": {
                "timeout": TIMEOUT,
                "workspace": str(tmp_path / "ws"),
                "limits": {"processes": 32, "file_mb": 1},
                **terminal,
            }
        },
    )


def attempt(upstream: FakeUpstream, url: str, command: str) -> str:
    """Have the model run ``command``; what the tool returned to it. Then Iris must still
    answer a plain request."""
    upstream.script(tool_call("terminal", [json.dumps({"command": command})]), text("done"))
    before = len(upstream.requests)
    with OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=60) as api:
        answer = api.chat.completions.create(model="iris-agent", messages=USER)
        assert answer.choices[0].message.content == "done"
        messages: list[dict[str, Any]] = upstream.requests[before + 1].body["messages"]
        result = str(messages[-1]["content"])
        upstream.script(text("still serving"))
        again = api.chat.completions.create(model="iris-agent", messages=USER)
        assert again.choices[0].message.content == "still serving"
    return result


def host_processes(marker: str) -> list[int]:
    """Host PIDs whose command line holds ``marker``."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry))
    return found


def connects(port: int) -> str:
    """A python3 one-liner that tries 127.0.0.1:``port`` and prints what came of it."""
    return (
        "python3 -c \"import socket\ntry:\n s=socket.create_connection(('127.0.0.1',"
        f"{port}),3); print('CONNECTED', s.recv(16))\nexcept OSError as e: print('NOCONNECT', e)\""
    )


def test_iris_command_line_and_environment_are_not_in_proc(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    server, url = start(served, tmp_path)
    config = str(server.process.args[-1])  # type: ignore[index]
    result = attempt(
        upstream,
        url,
        "echo ppid=$PPID; cat /proc/$PPID/cmdline /proc/$PPID/environ; "
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done",
    )
    # Its parent is its sandbox's own clock (``timeout``, PID 2, under bwrap's init): Iris is not
    # in its /proc at all.
    assert "ppid=2\n/usr/bin/timeout" in result
    assert "iris.cli" not in result and config not in result and KEY not in result


def test_the_config_the_store_and_iris_home_are_not_there(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path, isolated_home: Path
) -> None:
    _, url = start(served, tmp_path)
    targets = [tmp_path / "config.yaml", tmp_path / "iris.db", isolated_home / ".iris"]
    result = attempt(upstream, url, "; ".join(f"cat {t}" for t in targets) + "; ls ~ /root")
    assert result.count("No such file or directory") >= len(targets) + 1
    assert KEY not in result and TOKEN not in result and "SQLite" not in result


def test_nothing_outside_the_workspace_can_be_written(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = start(served, tmp_path)
    outside = tmp_path / "pwned"
    result = attempt(
        upstream,
        url,
        f"touch {outside} /usr/pwned /etc/pwned /pwned; echo x > ../pwned; "
        "touch /workspace/inside && echo wrote-inside",
    )
    assert "wrote-inside" in result
    assert not outside.exists() and not Path("/usr/pwned").exists()
    assert not Path("/etc/pwned").exists() and not Path("/pwned").exists()
    (folder,) = (tmp_path / "ws").iterdir()  # the conversation's own folder
    assert (folder / "inside").exists()


def test_redis_the_upstream_and_iris_serve_on_loopback_are_out_of_reach(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path, redis: FakeRedis
) -> None:
    _, url = start(served, tmp_path)
    iris_port = int(url.rsplit(":", 1)[1])
    upstream_port = int(upstream.base_url.split(":")[2].split("/")[0])
    ports = (redis.port, upstream_port, iris_port)
    result = attempt(upstream, url, "; ".join(connects(port) for port in ports))
    assert "CONNECTED" not in result and result.count("NOCONNECT") == len(ports)
    assert redis.connections == 0
    # From the host the same stand-in answers: the sandbox's network is what stops it.
    with socket.create_connection(("127.0.0.1", redis.port), 3) as sock:
        assert sock.recv(16) == b"+PONG\r\n"


def test_no_host_can_be_resolved_or_reached(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = start(served, tmp_path)
    result = attempt(
        upstream,
        url,
        "python3 -c \"import socket\ntry: print('RESOLVED', socket.getaddrinfo('pypi.org', 443))"
        "\nexcept OSError as e: print('no-dns', e)\"; "
        + connects(53).replace("127.0.0.1", "1.1.1.1"),
    )
    assert "RESOLVED" not in result and "no-dns" in result
    assert "CONNECTED" not in result and "NOCONNECT" in result


def test_a_setsid_child_does_not_outlive_the_timeout_to_reach_the_iris_socket(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = start(served, tmp_path)
    port = int(url.rsplit(":", 1)[1])
    marker = f"{TIMEOUT + 1}.{uuid.uuid4().int % 10**6:06d}"  # a sleep no one else runs
    late = f"sleep {marker}; {connects(port)} > /workspace/reached"
    command = f"setsid sh -c '{late}' > /dev/null 2>&1 & (sleep {marker} &) ; sleep 60"
    result = attempt(upstream, url, command)
    assert f"[timed out after {TIMEOUT} s]" in result
    assert host_processes(f"sleep {marker}") == []  # gone by the time the tool returned
    assert not any((tmp_path / "ws").glob("*/reached"))


def test_a_command_past_its_timeout_leaves_no_process(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = start(served, tmp_path)
    marker = f"{TIMEOUT + 300}.{uuid.uuid4().int % 10**6:06d}"
    result = attempt(upstream, url, f"nohup sleep {marker} & sleep {marker}")
    assert f"[timed out after {TIMEOUT} s]" in result
    assert host_processes(f"sleep {marker}") == []


def test_a_fork_bomb_is_held_by_the_process_limit(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = start(served, tmp_path)
    result = attempt(upstream, url, "bomb() { bomb | bomb & }; bomb; sleep 2; echo after")
    # Forks fail past the limit, the command itself goes on to its end, and the next request
    # is answered (``attempt``).
    assert "Cannot fork" in result and "after" in result, result


def test_yes_into_a_file_stops_at_the_file_size_limit(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = start(served, tmp_path)
    attempt(upstream, url, "yes > big")
    (big,) = (tmp_path / "ws").glob("*/big")
    assert 0 < big.stat().st_size <= 1024 * 1024


def test_ptrace_and_mount_are_refused_by_seccomp(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _, url = start(served, tmp_path)
    probe = (
        'python3 -c "import ctypes,os\nlibc=ctypes.CDLL(None,use_errno=True)\n'
        "print('ptrace', libc.ptrace(0,0,0,0), os.strerror(ctypes.get_errno()))\n"
        "print('mount', libc.mount(b'none',b'/tmp',b'tmpfs',0,None),"
        ' os.strerror(ctypes.get_errno()))"'
    )
    result = attempt(upstream, url, probe)
    assert "ptrace -1 Operation not permitted" in result
    assert "mount -1 Operation not permitted" in result


def test_iris_serve_exiting_ends_a_running_sandbox(
    served: StartServed, upstream: FakeUpstream, tmp_path: Path
) -> None:
    server, url = start(served, tmp_path, timeout=120)
    marker = f"300.{uuid.uuid4().int % 10**6:06d}"
    upstream.script(tool_call("terminal", [json.dumps({"command": f"sleep {marker}"})]))

    def ask() -> None:
        api = OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=60)
        with api, contextlib.suppress(Exception):  # the server goes away mid-request
            api.chat.completions.create(model="iris-agent", messages=USER)

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    # The command itself, not bwrap (whose command line holds it too): a kill -9 while bwrap
    # sets up is the test below's, in tests/agent/test_sandbox.py.
    until(lambda: host_processes(f"sleep\0{marker}") != [], "the command never started")
    server.stop()  # SIGKILL: no clean shutdown runs
    # a hang guard (the command sleeps far longer): a loaded machine may take its time
    gone = lambda: host_processes(f"sleep {marker}") == []  # noqa: E731
    until(gone, "the sandbox outlived iris serve", seconds=45)
    asking.join(30)


def until(condition: Callable[[], bool], failure: str, seconds: float = 20) -> None:
    """Wait for ``condition`` (checked every 50 ms) or fail saying ``failure``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.05)

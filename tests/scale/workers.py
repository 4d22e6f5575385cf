"""iris serve --workers N on Redis: its worker processes, their sockets and one API call through them."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from openai import OpenAI


def workers_of(parent: int) -> list[int]:
    """The worker processes of ``iris serve --workers`` (not multiprocessing's helpers)."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    found: list[int] = []
    for pid in map(int, children):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        if b"multiprocessing.spawn" in command and b"resource_tracker" not in command:
            found.append(pid)
    return found


def sockets(pid: int, port: int, state: str) -> int:
    """Sockets of the process ``pid`` on local ``port`` in ``state`` (Linux /proc/net/tcp:
    "01" established, "0A" listening)."""
    mine: set[str] = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    mine.add(target[8:-1])
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, found, inode = fields[1], fields[3], fields[9]
        if int(local.split(":")[1], 16) == port and found == state and inode in mine:
            count += 1
    return count


def until(condition: Callable[[], bool], within: float = 10) -> None:
    deadline = time.monotonic() + within
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def ask(url: str, prompt: str) -> str:
    with OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=15) as client:
        reply = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": prompt}]
        )
    return reply.choices[0].message.content or ""

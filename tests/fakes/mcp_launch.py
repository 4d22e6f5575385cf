"""How the tests start the fake MCP server (``tests/fakes/mcp_server.py``): its ``mcp_servers``
entry for a stdio child, or a Streamable HTTP server in a subprocess on a free loopback port."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[2])


def stdio(**keys: Any) -> dict[str, Any]:
    """The ``mcp_servers`` entry that starts the fake server over stdio (``keys`` added)."""
    env = {"PYTHONPATH": ROOT, **keys.pop("env", {})}
    return {"command": sys.executable, "args": ["-m", "tests.fakes.mcp_server"], "env": env, **keys}


@contextmanager
def http_server(
    tmp_path: Path, module: str = "tests.fakes.mcp_server", *args: str
) -> Iterator[str]:
    """The fake server (or ``module``, with ``args``) over Streamable HTTP; yields its URL
    (``http://127.0.0.1:PORT/mcp``)."""
    port_file = tmp_path / "mcp-port"
    process = subprocess.Popen(
        [sys.executable, "-m", module, "http", str(port_file), *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text()):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("the fake MCP HTTP server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        process.kill()
        process.wait(10)

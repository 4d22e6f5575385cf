"""An iris serve with the socket on and a device paired to it, for the device tests."""

from __future__ import annotations

import asyncio
import re
import sys
from dataclasses import dataclass
from pathlib import Path

URL = re.compile(r"^  (http\S+/#token=(\S+))$", re.MULTILINE)


@dataclass
class Ran:
    code: int
    out: str
    err: str


async def iris(config: Path, *args: str) -> Ran:
    """``iris <args> --config <config>``, the real command in its own process."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "iris.cli",
        *args,
        "--config",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(30):
        out, err = await process.communicate()
    assert process.returncode is not None
    return Ran(process.returncode, out.decode(), err.decode())


async def pair(config: Path, name: str) -> str:
    added = await iris(config, "devices", "add", name)
    assert added.code == 0, added.err
    found = URL.search(added.out)
    assert found is not None, added.out
    return found.group(2)

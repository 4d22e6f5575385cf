"""The one line iris serve refuses to start with, for the store-topology tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fakes.served import free_port


# -- a store of the wrong kind: one line at start --------------------------------------------------
def refusal(tmp_path: Path, store: dict[str, Any]) -> str:
    """The one line ``iris serve`` refuses to start with (exit code not 0)."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "platforms: {iris: {enabled: false}}\n"
        f"server: {{port: {free_port()}}}\n"
        f"store: {{path: {tmp_path / 'iris.db'}, {', '.join(f'{k}: {v}' for k, v in store.items())}}}\n"
    )
    config.chmod(0o600)
    done = subprocess.run(
        [sys.executable, "-m", "iris.cli", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]

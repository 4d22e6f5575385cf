"""A wrong key sent until the address is refused, for the throttle's adversarial tests."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.served import Served, free_port, write_config


def start_failure(tmp_path: Path, **sections: object) -> str:
    config = write_config(tmp_path, "http://127.0.0.1:9/v1", free_port(), **sections)
    server = Served(config)
    try:
        assert server.process.wait(30) != 0
    finally:
        server.stop()
    return "".join(server.drain())

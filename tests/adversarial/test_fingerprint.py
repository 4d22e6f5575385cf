"""Finding 6 of the second pass: processes with different configs on one Redis shared
everything unchecked (a response stored through a key-protected process was read through one
with no key; one's device token read the other's chats; one's log_max_age trimmed the other's
chat). Now the first process's settings fingerprint the prefix, and a process whose settings
differ refuses to start, naming them; another prefix is another deployment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes.served import Served, free_port, write_config
from tests.fakes.upstream import FakeUpstream
from tests.scale.conftest import RedisServer, redis_server, serve_on_redis  # noqa: F401

pytestmark = pytest.mark.timeout(90)
KEY = "sk-fingerprint-0123456789abcdef0123"


def refused(tmp_path: Path, upstream: FakeUpstream, redis: RedisServer, **sections: Any) -> str:
    store = {"url": redis.url, "path": str(tmp_path / "other.db"), **sections.pop("store", {})}
    config = write_config(
        tmp_path, upstream.base_url, free_port(), name="other.yaml", store=store, **sections
    )
    server = Served(config)
    try:
        assert server.process.wait(30) != 0
    finally:
        server.stop()
    return "".join(server.drain())


@pytest.mark.parametrize(
    ("sections", "named"),
    [
        ({"platforms": {"iris": {"enabled": False}}}, "platforms.api_server.api_key"),
        (
            {"platforms": {"api_server": {"api_key": KEY}, "iris": {"log_max_age": 60}}},
            "platforms.iris.log_max_age",
        ),
        (
            {"platforms": {"api_server": {"api_key": KEY}, "iris": {"tokens": ["x" * 20]}}},
            "platforms.iris.tokens",
        ),
    ],
)
def test_a_process_with_other_settings_on_the_prefix_refuses_to_start(
    tmp_path: Path,
    upstream: FakeUpstream,
    redis_server: RedisServer,  # noqa: F811
    sections: dict[str, Any],
    named: str,
) -> None:
    keyed = {"api_server": {"api_key": KEY}, "iris": {"enabled": False}}
    with serve_on_redis(tmp_path, upstream.base_url, redis_server, ("a",), platforms=keyed):
        log = refused(tmp_path, upstream, redis_server, **sections)
        assert named in log and "store prefix 'iris'" in log
        assert KEY not in log and "Traceback" not in log
        # Another prefix is another deployment: it starts.
        other = {"url": redis_server.url, "path": str(tmp_path / "b.db"), "prefix": "other"}
        config = write_config(
            tmp_path, upstream.base_url, free_port(), name="b.yaml", store=other, **sections
        )
        server = Served(config)
        try:
            server.wait_for("Application startup complete")
        finally:
            server.stop()

"""The interop suite: real client libraries against Iris on the config the first run writes.

``iris`` is Iris's API server on a real 127.0.0.1 socket (the in-process server of the API
tests), configured from the first-run template (``streaming.enabled: true``) plus a
chat-completions model pointed at the scripted fake upstream. Each test scripts the upstream's
model replies, runs one client library's ordinary calls, and checks what its user would see.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from iris.config import TEMPLATE
from tests.api.conftest import IrisServer
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream

# A tool every client offers the model: the same schema in each client's own shape.
WEATHER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def first_run_sections() -> dict[str, Any]:
    """The sections the first-run template sets (today: ``streaming.enabled: true``)."""
    sections = yaml.safe_load(TEMPLATE) or {}
    assert sections["streaming"]["enabled"] is True, "the first run no longer streams"
    return sections


@pytest.fixture
def iris(make_config: MakeConfig, upstream: FakeUpstream) -> Iterator[IrisServer]:
    """Iris's API on the first-run config, its model the scripted upstream."""
    config = make_config(
        upstream.base_url, platforms={"iris": {"enabled": False}}, **first_run_sections()
    )
    server = IrisServer(config).start()
    yield server
    server.close()


def upstream_bodies(upstream: FakeUpstream) -> list[dict[str, Any]]:
    """The JSON bodies of the model requests Iris made, in order."""
    return [request.body for request in upstream.requests]


StartIris = Callable[..., IrisServer]
RECORDINGS = Path(__file__).parent / "recordings"


@pytest.fixture
def start_iris(make_config: MakeConfig, upstream: FakeUpstream) -> Iterator[StartIris]:
    """``start_iris(**sections)``: Iris's API on the first-run config plus ``sections`` (an API
    key, another provider...), its model the scripted upstream."""
    servers: list[IrisServer] = []

    def start(**sections: Any) -> IrisServer:
        platforms = {"iris": {"enabled": False}, **sections.pop("platforms", {})}
        config = make_config(
            upstream.base_url, platforms=platforms, **{**first_run_sections(), **sections}
        )
        server = IrisServer(config).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def recording(name: str, **values: str) -> Any:
    """A recorded client's requests (``recordings/<name>.json``) with ``{placeholders}`` filled."""
    raw = (RECORDINGS / f"{name}.json").read_text()
    for key, value in values.items():
        raw = raw.replace("{" + key + "}", value)
    return json.loads(raw)

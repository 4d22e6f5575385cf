"""Shared fixtures: an isolated home and environment for every test, and config builders."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from iris.config import Config, config_from_dict
from tests.fakes.store_faults import ReadOnlyFiles
from tests.fakes.upstream import FakeUpstream

_ENV = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "IRIS_MODEL",
    "IRIS_CONFIG",
    "IRIS_STREAMING_ENABLED",
    "HERMES_STREAMING_ENABLED",
)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test reads or writes the real ~/.iris or picks up the developer's provider env."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    return home


MakeConfig = Callable[..., Config]


@pytest.fixture
def make_config(tmp_path: Path) -> MakeConfig:
    """``make_config(base_url, **sections)``: a config pointing at a (fake) provider.

    Sections are merged over a test baseline: store in tmp_path, a chat-completions model
    named ``fake-model`` with key ``sk-test``."""

    def build(base_url: str | None = None, **sections: Any) -> Config:
        data: dict[str, Any] = {"store": {"path": str(tmp_path / "iris.db")}}
        if base_url is not None:
            data["model"] = {
                "provider": "chat_completions",
                "base_url": base_url,
                "name": "fake-model",
                "api_key": "sk-test",
            }
        for key, value in sections.items():
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        return config_from_dict(data, env={})

    return build


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    """A scripted OpenAI-compatible server on 127.0.0.1: ``up.script(text("Hi"))``, then point
    a client at ``up.base_url``. See tests/fakes/upstream.py."""
    with FakeUpstream() as up:
        yield up


@pytest.fixture
def read_only() -> Iterator[Callable[[Path], None]]:
    """``read_only(path)``: make a file Iris cannot write (see tests/fakes/store_faults.py)."""
    files = ReadOnlyFiles()
    yield files.make
    files.undo()

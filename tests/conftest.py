"""Shared fixtures: an isolated home and environment for every test, and config builders."""

from __future__ import annotations

import asyncio
import gc
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import settings

from iris.config import Config, config_from_dict
from tests.fakes.store_faults import ReadOnlyFiles
from tests.fakes.upstream import FakeUpstream

# Tests never assert wall-clock times, and hypothesis's per-example deadline is one: on a loaded
# machine (parallel workers, CI beside other jobs) an example that once took 265 ms made a
# property fail as "flaky". A property's own @settings still sets its example count.
settings.register_profile("iris", deadline=None)
settings.load_profile("iris")


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the marks on the workers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep the tests that share an expensive fixture on one xdist worker (``--dist
    loadgroup``, in pyproject's addopts), so that it is built once, not once per worker that
    runs one of them: a module-scoped fixture (a served app and its browser, the embedded
    model, a Redis cluster) groups its module's tests; a session-scoped one of ours (Synapse)
    groups every test that uses it. Other tests are spread one by one, as before."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = _shared_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def _shared_fixture_group(item: pytest.Item) -> str | None:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    grouped: str | None = None
    for name in info.names_closure:
        definitions = info.name2fixturedefs.get(name) or ()
        if not definitions or not definitions[-1].func.__module__.startswith("tests."):
            continue  # pytest's own and plugins' (tmp_path_factory, event loops)
        scope = definitions[-1].scope
        if scope == "session":
            return name
        module = getattr(item, "module", None)
        if scope in ("module", "package") and module is not None:
            grouped = module.__name__
    return grouped


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


@pytest.fixture(autouse=True)
def no_pending_tasks(request: pytest.FixtureRequest) -> None:
    """An async test fails if it leaves asyncio tasks running: every task has an owner that
    ends it (tasks.task_group), so one still pending at the end is a leak."""
    marker = request.node.get_closest_marker("asyncio")
    scope = marker.kwargs.get("loop_scope", "function") if marker is not None else "function"
    # The check runs in a function-scoped loop: a test on a wider loop shares it with others.
    if inspect.iscoroutinefunction(request.function) and scope == "function":
        # Requested here, first, so it is torn down last: after the test's own fixtures (a
        # server, a gateway) had their chance to end their tasks, in the test's own loop.
        request.getfixturevalue("tasks_left")


@pytest_asyncio.fixture
async def tasks_left() -> AsyncIterator[None]:
    yield
    here = asyncio.current_task()
    # An async generator dropped unclosed (the openai SDK's line iterators after an in-band
    # error do this) is closed by a task the loop starts when the garbage collector finds it:
    # collect now, so that happens here and not at a random later test, and let it finish.
    gc.collect()
    for _ in range(3):  # a task cancelled as the test ended needs a turn of the loop to finish
        await asyncio.sleep(0)
    closing = [t for t in asyncio.all_tasks() if _closes_a_generator(t) and not t.done()]
    if closing:
        await asyncio.wait(closing, timeout=2.0)
    pending = [t for t in asyncio.all_tasks() if t is not here and not t.done()]
    if not pending:
        return
    names = ", ".join(sorted(_describe(t) for t in pending))
    for task in pending:
        task.cancel()
    pytest.fail(f"the test left {len(pending)} asyncio task(s) pending: {names}", pytrace=False)


def _closes_a_generator(task: asyncio.Task[Any]) -> bool:
    return type(task.get_coro()).__name__ == "async_generator_athrow"


def _describe(task: asyncio.Task[Any]) -> str:
    coro = task.get_coro()
    return f"{task.get_name()} ({getattr(coro, '__qualname__', coro)})"


pytest_plugins = ["pytester"]  # tests/test_task_leaks.py runs the fixture above on a leaky test

MakeConfig = Callable[..., Config]


def shared_workspace(tmp_path: Path) -> dict[str, str]:
    """``tools.terminal`` for a test that reads what commands wrote: every chat's commands run
    in one sandbox workspace, ``tmp_path/ws``."""
    return {"workspace": str(tmp_path / "ws"), "workspace_scope": "shared"}


def anywhere(folder: Path, name: str) -> bool:
    """A file called ``name`` somewhere under ``folder``: a test's store folder holds every
    sandbox workspace of its chats, so a command that ran left its file here."""
    return any(folder.rglob(name))


@pytest.fixture
def make_config(tmp_path: Path) -> MakeConfig:
    """``make_config(base_url, **sections)``: a config pointing at a (fake) provider.

    Sections are merged over a test baseline: store in tmp_path, a chat-completions model
    named ``fake-model`` with key ``sk-test``, and tools that run unasked
    (``tools.approval.mode: off``: the approval tests ask for ``ask`` themselves)."""

    def build(base_url: str | None = None, **sections: Any) -> Config:
        data: dict[str, Any] = {
            "store": {"path": str(tmp_path / "iris.db")},
            "tools": {"approval": {"mode": "off"}},
        }
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

"""The conftest's guard: an async test that leaves a task pending fails; one that ends its
tasks passes."""

from __future__ import annotations

import asyncio

import pytest

from iris.tasks import Supervisor

PROBE = """
import asyncio

from iris.tasks import task_group


async def test_leaks() -> None:
    asyncio.create_task(asyncio.sleep(100))  # noqa: RUF006


async def test_owned() -> None:
    async with task_group() as group:
        group.create_task(asyncio.sleep(0))


def test_sync() -> None:
    assert True
"""


def test_a_test_that_leaves_a_task_pending_fails(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("from tests.conftest import no_pending_tasks, tasks_left  # noqa: F401")
    pytester.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function")
    pytester.makepyfile(test_probe=PROBE)
    # In-process, under an xdist worker: plugins of the outer run that would act on the inner
    # one (pytest-benchmark, where installed, refuses to run beside xdist) stay out of it.
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:benchmark"
    )
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_leaks*", "*left 1 asyncio task(s) pending*sleep*"]
    )


async def test_a_supervisor_ends_and_awaits_every_task_it_holds() -> None:
    """The owners whose tasks span two calls (MCP servers, the tailer's slot reads, the local
    model's launch, the REPL's approval answers): a task's failure ends no other, and
    ``close`` leaves nothing pending (the conftest's guard fails the test otherwise)."""
    supervisor = Supervisor()
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    async def broken() -> None:
        raise RuntimeError("one task's bug")

    running = supervisor.create_task(forever())
    failed = supervisor.create_task(broken())
    await started.wait()
    await asyncio.wait([failed])
    assert not running.done() and len(supervisor) == 1
    await supervisor.close(grace=0.01)
    assert running.cancelled() and len(supervisor) == 0
    assert isinstance(failed.exception(), RuntimeError)

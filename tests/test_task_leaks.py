"""The conftest's guard: an async test that leaves a task pending fails; one that ends its
tasks passes."""

from __future__ import annotations

import pytest

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

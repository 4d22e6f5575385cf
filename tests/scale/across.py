"""What two processes on any shared topology (a cluster, Sentinels) must do together, written
once: the data tests' two processes, stored responses / background runs / devices across them,
and a standby poller taking over a bot. ``test_cluster`` and ``test_sentinel`` call these with
their own set-up and ``store`` keys."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, text
from tests.scale import test_data_background, test_data_processes
from tests.scale.conftest import Shared, serve_on_redis
from tests.scale.pollers import CHAT, USER, bot_servers, said
from tests.scale.processes import Process


@contextlib.contextmanager
def data_processes(
    tmp_path: Path, upstream: FakeUpstream, shared: Shared, store: dict[str, Any]
) -> Iterator[tuple[Process, Process]]:
    """``tests/scale/test_data_processes.py``'s two processes, on ``shared``."""
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        shared,
        store=store,
        platforms={"iris": {"enabled": True, "tokens": [test_data_processes.TOKEN]}},
    ) as running:
        started = [
            Process(served, url, tmp_path / f"{name}.yaml")
            for name, (served, url) in zip(("a", "b"), running, strict=True)
        ]
        for process in started:
            process.config.chmod(0o600)
        yield started[0], started[1]


async def data_across_processes(upstream: FakeUpstream, processes: tuple[Process, Process]) -> None:
    """Stored responses, background runs and paired devices work across the two processes, and
    no command was refused for keys in different slots."""
    await asyncio.to_thread(
        test_data_background.test_a_run_on_a_is_cancelled_through_b, upstream, processes
    )
    await asyncio.to_thread(
        test_data_processes.test_a_response_stored_through_a_is_continued_through_b,
        upstream,
        processes,
    )
    await asyncio.to_thread(
        test_data_background.test_a_run_on_a_is_polled_and_resumed_through_b_with_no_gap_and_no_duplicate,
        upstream,
        processes,
    )
    await (
        test_data_processes.test_a_device_paired_once_is_accepted_by_both_and_a_revoke_reaches_both(
            processes
        )
    )
    for process in processes:
        assert not any("CROSSSLOT" in line for line in process.served.drain())


async def standby_poller_takes_over(
    tmp_path: Path, upstream: FakeUpstream, shared: Shared, store: dict[str, Any]
) -> None:
    """Two pollers for one bot: one polls, the other stands by and takes over after kill -9."""
    async with (
        FakeBotApi() as api,
        bot_servers(tmp_path, upstream, shared, api, lease=1, store_keys=store) as start,
    ):
        a = await start("a")
        await api.wait_until(lambda: "a" in api.polled_by)
        b = await start("b")
        assert any("telegram: standing by" in line for line in b.drain()), b.log
        a.process.kill()  # kill -9: its lease runs out
        await api.wait_until(lambda: "b" in api.polled_by, within=15)
        upstream.script(text("hello from the survivor"))
        api.user_says(chat_id=CHAT, user_id=USER, text="still there?")
        await api.wait_until(lambda: said(api, "hello from the survivor"), within=15)
        assert not any("Traceback" in line for line in b.drain()), b.log

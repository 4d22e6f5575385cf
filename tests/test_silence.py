"""``Silence``: the deadline between two events of a stream (the provider's ``timeout``)."""

from __future__ import annotations

import asyncio

import pytest

from iris.tasks import Silence

pytestmark = pytest.mark.timeout(30)


async def test_a_steady_stream_longer_than_the_deadline_is_not_cut() -> None:
    # 3 s of events 50 ms apart under a 1 s deadline: only a gap counts, not the length.
    async with Silence(1.0) as silence:
        for _ in range(60):
            await asyncio.sleep(0.05)
            silence.seen()
    assert not silence.expired()


async def test_a_gap_past_the_deadline_raises_timeout_error() -> None:
    stalled = asyncio.Event()  # never set: the stream stalls after one event
    silence = Silence(0.2)
    with pytest.raises(TimeoutError):
        async with silence:
            silence.seen()
            await stalled.wait()
    assert silence.expired()


async def test_an_inner_timeout_is_not_taken_for_the_silence() -> None:
    silence = Silence(30.0)
    with pytest.raises(TimeoutError):
        async with silence:
            async with asyncio.timeout(0.05):
                await asyncio.Event().wait()
    assert not silence.expired()


async def test_no_deadline_never_expires() -> None:
    async with Silence(None) as silence:
        await asyncio.sleep(0.05)
    assert not silence.expired()

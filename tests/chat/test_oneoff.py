"""The gateway's one-off messages wait for the chat's and the bot's budgets, on virtual time."""

from __future__ import annotations

import asyncio

import pytest

from iris.surfaces.chat.budget import Limit, RateBudget, SharedBudget
from iris.surfaces.chat.oneoff import send_once
from iris.surfaces.chat.platforms.base import PlatformRateLimited
from iris.surfaces.chat.throttle import Throttle
from tests.fakes.recording_platform import RecordingPlatform
from tests.fakes.virtual_time import run_virtual


def one_a_second() -> SharedBudget:
    return SharedBudget(
        [Limit("bot", RateBudget(1, 1.0, margin=0.0))], {"send": ["bot"], "edit": ["bot"]}
    )


def test_a_one_off_takes_its_turn_at_the_shared_budget_before_previews() -> None:
    async def scenario() -> list[tuple[float, str]]:
        loop = asyncio.get_running_loop()
        budget = one_a_second()
        platform = RecordingPlatform(budget=budget)
        budget.seat("other").spend("send", loop.time())  # the bot just spent its second
        preview = budget.seat("previewing")
        assert preview.ready_at("edit", "preview", loop.time()) == 1.0
        throttle = Throttle(RateBudget(1, 1.0, margin=0.0), 1.5, seat=budget.seat("x"))
        sent = asyncio.create_task(send_once(platform, "x", "Busy", throttle=throttle))
        await asyncio.sleep(0)  # in line now, ahead of the preview
        assert preview.ready_at("edit", "preview", loop.time()) == 2.0
        await sent
        return [(c.t, c.text) for c in platform.edits_and_sends()]

    assert run_virtual(scenario()) == [(1.0, "Busy")]


def test_a_one_off_keeps_the_chats_own_pace_and_backs_off_after_a_429() -> None:
    async def scenario() -> list[tuple[float, str]]:
        platform = RecordingPlatform(budget=one_a_second())
        throttle = Throttle(RateBudget(1, 2.0, margin=0.0), 1.5, seat=platform.budget.seat("x"))
        await send_once(platform, "x", "one", throttle=throttle)
        await send_once(platform, "x", "two", throttle=throttle)  # the chat's 1 per 2 s
        platform.script.append(PlatformRateLimited(10.0))
        with pytest.raises(PlatformRateLimited):  # one call: the caller hears of the 429
            await send_once(platform, "x", "refused", throttle=throttle)
        await send_once(platform, "x", "three", throttle=throttle)  # after retry_after
        return [(c.t, c.text) for c in platform.edits_and_sends()]

    assert run_virtual(scenario()) == [(0.0, "one"), (2.0, "two"), (14.0, "three")]

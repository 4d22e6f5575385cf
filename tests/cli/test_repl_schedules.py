"""``iris chat``'s schedules: the real REPL on a terminal of its own, the scripted fake upstream,
the scheduler on a virtual clock (a run comes due when the test moves the clock and wakes it)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

from iris.surfaces.cli.repl import IN_MEMORY
from tests.cli.repl_session import chat_on_terminal, streaming
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, gated, text

FOOTER = "fake-model · 10 in · 5 out tokens"
START = 1_800_000_000.0  # Fri 2027-01-15 08:00 UTC


def matching(pattern: str) -> Callable[[str], bool]:
    return lambda shown: re.search(pattern, shown) is not None


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


async def test_a_reminder_is_answered_listed_run_as_a_marked_reply_and_removed(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(text("Time to stretch!"), text("Drink water."))
    clock = Clock()
    async with chat_on_terminal(streaming(make_config, upstream), clock) as s:
        s.type("/tz Europe/Berlin\r")
        await s.see("your time zone: Europe/Berlin (now 09:00 Europe/Berlin)")
        s.type("/remind in 1m stretch\r")
        shown = await s.see(matching(r"⏰ (\w+): Fri 2027-01-15 09:01 Europe/Berlin: stretch"))
        found = re.search(r"⏰ (\w+): Fri", shown)
        assert found is not None
        first = found.group(1)
        s.type("/schedules\r")
        shown = await s.see(IN_MEMORY)
        assert re.search(rf"{first}\s+next Fri 2027-01-15 09:01\s+once\s+stretch", shown)
        assert "times in Europe/Berlin" in shown
        assert upstream.requests == []  # commands never reach the model

        clock.now += 61
        s.chat.scheduler.wake()
        shown = await s.replies(1)
        # The run is a reply in its box, opened by the ⏰ line.
        box = shown[shown.rindex("╭─ Iris") :]
        assert box.index("⏰ stretch") < box.index("Time to stretch!") < box.index("╰─")
        assert upstream.requests[0].body["messages"][-1] == {"role": "user", "content": "stretch"}

        # Done once: the one-off is gone; another is made and removed before it runs.
        s.type("/schedules\r")
        await s.see("no schedules in this chat (your time zone: Europe/Berlin)")
        s.type("/remind in 5m drink\r")
        shown = await s.see(matching(r"⏰ \w+: Fri 2027-01-15 09:06 Europe/Berlin: drink"))
        second = re.findall(r"⏰ (\w+): Fri 2027-01-15 09:06", shown)[-1]
        s.type(f"/unschedule {second}\r")
        await s.see(f"removed {second}")
        clock.now += 600
        s.chat.scheduler.wake()
        s.type("/schedules\r")
        shown = await s.see(lambda t: t.count("no schedules in this chat") >= 2)
        assert "Drink water." not in shown
    assert len(upstream.requests) == 1


async def test_the_conversation_goes_on_after_a_scheduled_run(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(text("Summary: all quiet."), text("Nothing else."))
    clock = Clock()
    async with chat_on_terminal(streaming(make_config, upstream), clock) as s:
        s.type("/every hour summarise\r")
        await s.see(matching(r"🔁 \w+: `0 \* \* \* \*` \(\S+\), first"))
        clock.now += 3600
        s.chat.scheduler.wake()
        await s.see("Summary: all quiet.")
        await s.replies(1)
        s.type("anything else?\r")
        await s.replies(2)
        s.type("/schedules\r")
        await s.see("every `0 * * * *`")  # a rule stays, with its next run
    sent = upstream.requests[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] != "system"] == [
        "summarise",
        "Summary: all quiet.",
        "anything else?",
    ]


async def test_a_run_due_while_a_reply_is_written_waits_for_its_end(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(gated("Long ", "answer", after=1), text("Pinged."))
    clock = Clock()
    async with chat_on_terminal(streaming(make_config, upstream), clock) as s:
        s.type("/remind in 1m ping\r")
        await s.see(": ping")
        s.type("go\r")
        assert await asyncio.to_thread(upstream.gate_reached.wait, 5.0)
        clock.now += 61
        s.chat.scheduler.wake()
        await asyncio.wait_for(s.chat.due.came.wait(), 5)  # the run is due, and waits
        assert "⏰ ping" not in s.term.out.text
        upstream.release()
        shown = await s.replies(2)
    assert shown.index("Long answer") < shown.index(FOOTER) < shown.index("⏰ ping")
    assert shown.index("⏰ ping") < shown.index("Pinged.")


async def test_what_is_typed_at_the_prompt_survives_a_run_that_comes_due(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    upstream.script(text("Stand up."), text("Half typed, now sent."))
    clock = Clock()
    async with chat_on_terminal(streaming(make_config, upstream), clock) as s:
        s.type("/remind in 1m stand up\r")
        await s.see("stand up")
        s.type("half typed")
        await s.see("half typed")
        clock.now += 61
        s.chat.scheduler.wake()
        await s.replies(1)
        s.type(" message\r")
        await s.replies(2)
    assert upstream.requests[-1].body["messages"][-1]["content"] == "half typed message"


async def test_limits_are_refused_naming_the_setting(
    make_config: MakeConfig, upstream: FakeUpstream
) -> None:
    config = streaming(make_config, upstream, schedules={"max_per_chat": 1, "min_interval_s": 600})
    async with chat_on_terminal(config, Clock()) as s:
        s.type("/every 5m ping\r")
        await s.see("the shortest allowed is 600s (schedules.min_interval_s)")
        s.type("/remind in 1h one\r")
        await s.see(": one")
        s.type("/remind in 2h two\r")
        await s.see(
            "/remind refused: this chat has 1 schedules, the most it may (schedules.max_per_chat)"
        )
    assert upstream.requests == []

"""What a chat keeps in its history after each way a turn ends (the one rule of
``iris.agent.history``), seen where it matters: the next request to the model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from iris.agent.conversation import Exchange
from iris.agent.core import Turn
from iris.events import Event, TextDelta
from iris.surfaces.chat.platforms.base import IncomingMessage
from iris.surfaces.chat.runner import ChatSurface
from tests.chat.conftest import Gateway
from tests.fakes.recording_platform import RecordingPlatform
from tests.fakes.upstream import FakeUpstream, hold, stream_error, text, tool_call

pytestmark = pytest.mark.timeout(20)


def message(text_: str) -> IncomingMessage:
    return IncomingMessage("telegram", "c1", "7", text_)


def sent(upstream: FakeUpstream) -> list[tuple[str, Any]]:
    return [(m["role"], m["content"]) for m in upstream.requests[-1].body["messages"]]


async def say(surface: ChatSurface, platform: RecordingPlatform, text_: str) -> None:
    await platform.deliver(message(text_))
    await surface.idle()


async def test_a_complete_reply_is_kept(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.script(text("Blue."), text("Yes."))
    surface, platform = await gateway(tools={"enabled": []})
    await say(surface, platform, "sky?")
    await say(surface, platform, "sure?")
    assert sent(upstream) == [("user", "sky?"), ("assistant", "Blue."), ("user", "sure?")]


@pytest.mark.parametrize("stop", [[], ["/stop"]], ids=["a new message", "/stop"])
async def test_an_interrupted_reply_is_kept_as_shown_and_marked_cut(
    gateway: Gateway, upstream: FakeUpstream, stop: list[str]
) -> None:
    upstream.script(hold("Working ", "on ", "it"), text("Done."))
    surface, platform = await gateway(tools={"enabled": []})
    await platform.deliver(message("one"))
    await platform.wait_for(lambda: bool(platform.chat()) and "it" in platform.chat()[0])
    for command in stop:
        await say(surface, platform, command)
    await say(surface, platform, "two")
    assert platform.chat()[0] == "Working on it" and platform.chat()[-1] == "Done."
    assert sent(upstream) == [
        ("user", "one"),
        ("assistant", "Working on it\n\n[interrupted]"),
        ("user", "two"),
    ]


async def test_a_reply_that_failed_midway_is_kept_as_far_as_it_was_shown(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(stream_error("The sky ", "is bl"), text("blue."))
    surface, platform = await gateway(tools={"enabled": []})
    await say(surface, platform, "sky?")
    assert platform.chat()[0].startswith("The sky is bl\n\n⚠️ ")
    await say(surface, platform, "go on")
    assert sent(upstream) == [
        ("user", "sky?"),
        ("assistant", "The sky is bl\n\n[interrupted]"),
        ("user", "go on"),
    ]


async def test_a_failure_after_a_tool_keeps_the_tool_exchange(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(
        tool_call("terminal", ['{"command": "echo hi"}'], content="Looking."),
        stream_error("It says ", "h"),
        text("hi."),
    )
    surface, platform = await gateway(tools={"enabled": ["terminal"]})
    await say(surface, platform, "run it")
    await say(surface, platform, "go on")
    history = sent(upstream)
    assert [role for role, _ in history] == ["user", "assistant", "tool", "assistant", "user"]
    assert history[1] == ("assistant", "Looking.")
    assert "hi" in history[2][1]
    assert history[3] == ("assistant", "It says h\n\n[interrupted]")


async def test_a_turn_that_crashed_keeps_its_question(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream.script(text("Blue."), text("Yes."))
    surface, platform = await gateway(tools={"enabled": []})

    async def broken(*_: Any) -> None:
        raise RuntimeError("a bug after the reply")

    with monkeypatch.context() as patch:
        patch.setattr(Exchange, "keep", broken)
        await say(surface, platform, "sky?")
    await say(surface, platform, "sure?")
    assert sent(upstream) == [("user", "sky?"), ("user", "sure?")]


async def test_a_turn_whose_stream_broke_keeps_the_reply_as_it_was_shown(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream.script(hold("Partial ", "answer"), text("Next."))
    surface, platform = await gateway(tools={"enabled": []})
    real = Turn.__aiter__
    broke: list[bool] = []

    def breaking(turn: Turn) -> AsyncIterator[Event]:
        async def events() -> AsyncIterator[Event]:
            texts = 0
            async for event in real(turn):
                yield event
                texts += isinstance(event, TextDelta)
                if texts == 2 and not broke:
                    broke.append(True)
                    raise RuntimeError("a bug in the event stream")

        return events()

    monkeypatch.setattr(Turn, "__aiter__", breaking)
    await say(surface, platform, "go")
    assert platform.chat() == ["Partial answer\n\n⚠️ The reply failed."]
    await say(surface, platform, "and then?")
    assert sent(upstream) == [
        ("user", "go"),
        ("assistant", "Partial answer\n\n[interrupted]"),
        ("user", "and then?"),
    ]

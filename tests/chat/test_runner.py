"""The gateway runner with the real agent and fake upstream, on a recording platform."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from iris.runtime import Runtime
from iris.surfaces.chat.platforms import PLATFORMS, build_platforms
from iris.surfaces.chat.platforms.base import IncomingMessage, PlatformError
from iris.surfaces.chat.runner import BUSY, QUEUED, ChatSurface
from tests.chat.conftest import Gateway
from tests.chat.messages import message
from tests.conftest import MakeConfig
from tests.fakes.recording_platform import RecordingPlatform
from tests.fakes.upstream import FakeUpstream, error, hold, text, tool_call

pytestmark = pytest.mark.timeout(20)


async def test_an_empty_allow_list_lets_nobody_reach_the_agent(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    surface, platform = await gateway(allowed=[])
    await platform.deliver(message("hello"))
    await surface.idle()
    assert len(platform.chat()) == 1 and "private" in platform.chat()[0]
    assert upstream.requests == []


async def test_a_failed_turn_tells_the_user_briefly(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(error(401, "bad key"))
    surface, platform = await gateway()
    await platform.deliver(message("hello"))
    await surface.idle()
    assert len(platform.chat()) == 1
    assert platform.chat()[0].startswith("⚠️ ")
    assert "\n" not in platform.chat()[0]


async def test_tool_progress_and_answer_are_separate_messages(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    note = tmp_path / "note.txt"
    note.write_text("secret plan")
    upstream.script(
        tool_call("read_file", ['{"path": ', f'"{note}"}}']),
        text("The ", "note ", "says ", "secret plan."),
    )
    surface, platform = await gateway(tools={"enabled": ["read_file"]})
    await platform.deliver(message("read my note"))
    await surface.idle()
    tools, answer = platform.chat()
    assert tools.startswith("🔧 read_file: /")  # the path, clipped to a chat-sized summary
    assert answer == "The note says secret plan."


async def test_an_overtaken_message_joins_the_history_and_the_newest_runs(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Working ", "on ", "it "), text("All ", "done."))
    surface, platform = await gateway()
    await platform.deliver(message("one"))
    # Interrupt only once all the held text is shown, so the kept text is known.
    await platform.wait_for(lambda: bool(platform.chat()) and "it" in platform.chat()[0])
    await platform.deliver(message("two"))
    await platform.deliver(message("three"))
    await surface.idle()
    assert platform.chat() == ["Working on it", "All done."]
    users = [m["content"] for m in upstream.requests[1].body["messages"] if m["role"] == "user"]
    assert users == ["one", "two", "three"]
    assert len(upstream.requests) == 2


async def test_streaming_off_for_the_platform_sends_the_reply_once(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(text("One ", "two ", "three ", "four."))
    surface, platform = await gateway(display={"platforms": {"telegram": {"streaming": False}}})
    await platform.deliver(message("count"))
    await surface.idle()
    assert [(c.kind, c.text) for c in platform.edits_and_sends()] == [
        ("send", "One two three four.")
    ]
    assert upstream.requests[0].stream is False


def test_the_registry_builds_only_enabled_platforms(make_config: MakeConfig) -> None:
    assert set(PLATFORMS) == {"telegram", "discord", "slack", "whatsapp", "matrix", "homeassistant"}
    assert build_platforms(make_config()) == []
    config = make_config(platforms={"telegram": {"enabled": True, "token": "1:x"}})
    assert [p.name for p in build_platforms(config)] == ["telegram"]


class _Unreachable(RecordingPlatform):
    async def connect(self, on_message: Any) -> None:
        raise PlatformError("telegram: cannot connect: Unauthorized")


async def test_a_platform_that_cannot_connect_leaves_the_others_running(
    make_config: MakeConfig, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    upstream.script(text("Still ", "here."))
    config = make_config(
        upstream.base_url,
        platforms={
            "telegram": {"enabled": True, "token": "1:x", "allowed_users": [7]},
            "discord": {"enabled": True, "token": "x", "allowed_users": [7]},
        },
    )
    runtime = Runtime.create(config)
    broken, working = _Unreachable(name="telegram"), RecordingPlatform(name="discord")
    surface = ChatSurface(runtime, platforms=[broken, working])
    await surface.start()
    try:
        assert "Unauthorized" in caplog.text
        await working.deliver(IncomingMessage("discord", "c", "7", "hi"))
        await surface.idle()
        assert working.chat() == ["Still here."]
    finally:
        await surface.stop()
        await runtime.agent.aclose()
        runtime.store.close()


def test_an_enabled_platform_without_a_token_is_reported_not_fatal(
    make_config: MakeConfig, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(platforms={"telegram": {"enabled": True, "token": ""}})
    assert build_platforms(config) == []
    assert "token" in caplog.text


async def test_stopping_the_server_settles_a_streaming_reply_without_cursor(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Half ", "an ", "answer "))
    surface, platform = await gateway()
    await platform.deliver(message("long question"))
    await platform.wait_for(lambda: bool(platform.chat()) and "answer" in platform.chat()[0])
    await surface.stop()
    assert platform.chat() == ["Half an answer"]
    assert not platform.connected


async def test_one_user_over_their_turn_limit_waits_in_line_then_is_answered(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Working "), text("Second", " answer"))
    surface, platform = await gateway(telegram={"max_turns_per_user": 1})
    surface.queued_after = 0.2
    await platform.deliver(message("one", chat="c1"))
    assert await asyncio.to_thread(upstream.gate_reached.wait, 5)
    await platform.deliver(message("two", chat="c2"))  # another chat, the same user
    # While it waits: typing, then once the short note with its place in line.
    await platform.wait_for(lambda: bool(platform.edits_and_sends("c2")))
    assert [c.text for c in platform.edits_and_sends("c2")] == [QUEUED.format(ahead=0)]
    assert any(c.kind == "typing" and c.chat_id == "c2" for c in platform.calls)
    assert len(upstream.requests) == 1  # it waits: the model is not asked yet
    upstream.release()
    await platform.wait_for(lambda: "Second answer" in platform.chat())
    await surface.idle()
    assert len(upstream.requests) == 2
    assert BUSY not in platform.chat()
    assert surface.runtime.turns.running == 0


async def test_max_turns_is_shared_by_every_user_and_past_the_line_comes_busy(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Working "), text("For eight"))
    surface, platform = await gateway(
        allowed=[7, 8, 9], server={"max_turns": 1}, telegram={"queue_size": 1}
    )
    surface.queued_after = 30.0  # no note in this test: typing only
    await platform.deliver(message("one", chat="c1"))
    assert await asyncio.to_thread(upstream.gate_reached.wait, 5)
    await platform.deliver(message("me too", user="8", chat="c2"))  # waits: the line's one place
    await platform.wait_for(lambda: any(c.chat_id == "c2" for c in platform.calls))
    await platform.deliver(message("and me", user="9", chat="c3"))  # the line is full
    await platform.wait_for(lambda: bool(platform.edits_and_sends("c3")))
    assert [c.text for c in platform.edits_and_sends("c3")] == [BUSY]
    assert platform.edits_and_sends("c2") == []  # typing only, no note yet
    upstream.release()
    await platform.wait_for(lambda: "For eight" in platform.chat())
    await surface.idle()
    assert [r.body["messages"][-1]["content"] for r in upstream.requests] == ["one", "me too"]


async def test_a_newer_message_takes_over_its_chats_place_in_line(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Working "), text("Answer"))
    surface, platform = await gateway(allowed=[7, 8], server={"max_turns": 1})
    surface.queued_after = 30.0
    await platform.deliver(message("one", chat="c1"))
    assert await asyncio.to_thread(upstream.gate_reached.wait, 5)
    await platform.deliver(message("first", user="8", chat="c2"))
    await platform.wait_for(lambda: any(c.chat_id == "c2" for c in platform.calls))
    await platform.deliver(message("second", user="8", chat="c2"))
    upstream.release()
    await platform.wait_for(lambda: "Answer" in platform.chat())
    await surface.idle()
    # One turn for c2, answering the newest message with the older one in its history.
    assert len(upstream.requests) == 2
    history = upstream.requests[1].body["messages"]
    assert [m["content"] for m in history if m["role"] == "user"] == ["first", "second"]
    assert surface.runtime.turns.running == 0


def test_whatsapp_is_not_started_without_its_app_secret(
    make_config: MakeConfig, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the app secret no webhook POST could be checked: none is trusted.
    section = {"enabled": True, "phone_number_id": "1065", "access_token": "EAAG"}
    config = make_config(platforms={"whatsapp": section})
    with caplog.at_level(logging.ERROR):
        assert build_platforms(config) == []
    assert "platforms.whatsapp.app_secret is empty" in caplog.text
    secret = {"app_secret_env": "IRIS_TEST_WHATSAPP_SECRET"}
    config = make_config(platforms={"whatsapp": {**section, **secret}})
    monkeypatch.setenv("IRIS_TEST_WHATSAPP_SECRET", "s3cret")
    [platform] = build_platforms(config)
    assert platform.name == "whatsapp" and not platform.capabilities.can_edit


async def test_stop_takes_a_waiting_message_out_of_the_line(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Working "), text("Later answer"))
    surface, platform = await gateway(allowed=[7, 8], server={"max_turns": 1})
    surface.queued_after = 30.0
    await platform.deliver(message("one", chat="c1"))
    assert await asyncio.to_thread(upstream.gate_reached.wait, 5)
    await platform.deliver(message("waiting", user="8", chat="c2"))
    await platform.wait_for(lambda: any(c.chat_id == "c2" for c in platform.calls))
    await platform.deliver(message("/stop", user="8", chat="c2"))
    await platform.wait_for(lambda: bool(platform.edits_and_sends("c2")))
    assert [c.text for c in platform.edits_and_sends("c2")] == ["stopped"]
    upstream.release()
    await surface.idle()
    assert len(upstream.requests) == 1  # it never reached the model
    await platform.deliver(message("now?", user="8", chat="c2"))
    await platform.wait_for(lambda: "Later answer" in platform.chat())
    await surface.idle()
    history = upstream.requests[1].body["messages"]
    assert [m["content"] for m in history if m["role"] == "user"] == ["waiting", "now?"]
    assert surface.runtime.turns.running == 0

"""An MCP tool's progress on the chat platforms: Slack's task timeline shows each note under the
task, and a Telegram reply's progress line shows it. The real platform SDKs against the local
fakes, the real agent, the fake MCP server (``tests/fakes/mcp_server.py``) as a stdio child."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.chat.harness import platform_config, running
from tests.conftest import MakeConfig
from tests.fakes.mcp_launch import stdio
from tests.fakes.slack_api import SlackAPI, message_event
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(60)

SLACK_OWNER = "U0000042"
THREAD = "1764453000.000200"


@pytest.fixture
async def slack_api() -> AsyncIterator[SlackAPI]:
    async with SlackAPI() as fake:
        yield fake


def slack(make_config: MakeConfig, upstream: FakeUpstream, api: SlackAPI, **more: Any) -> Any:
    settings = {
        "bot_token": api.bot_token,
        "app_token": api.app_token,
        "base_url": api.base_url,
        "allowed_users": [SLACK_OWNER],
    }
    return platform_config(make_config, upstream, "slack", settings, **more)


async def test_slacks_task_timeline_shows_each_progress_note_under_the_task(
    make_config: MakeConfig, upstream: FakeUpstream, slack_api: SlackAPI
) -> None:
    # A note every 1.5 s: slower than the channel's budget paces its calls (1 a second over
    # the window plus its margin, and a second from each answer), so each note gets a call of
    # its own; notes that come faster are coalesced, the newest shown.
    upstream.script(
        tool_call("mcp_fake_steps", [json.dumps({"n": 3, "seconds": 4.5})]),
        text("Stepped through."),
    )
    config = slack(make_config, upstream, slack_api, mcp_servers={"fake": stdio()})
    async with running(config) as surface:
        await slack_api.push_event(message_event(SLACK_OWNER, "<@UBOT0001> step", thread_ts=THREAD))
        await slack_api.wait_until(
            lambda: any(m.text == "Stepped through." for m in slack_api.messages.values())
        )
        await surface.idle()
    sent = [
        (chunk["status"], chunk.get("details", ""))
        for c in slack_api.calls
        if c.method.endswith("Stream")
        for chunk in c.args.get("chunks") or []
    ]
    assert sent[0] == ("in_progress", "")
    running_notes = [d for s, d in sent if s == "in_progress" and d]
    assert running_notes == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert sent[-1] == ("complete", "step 3 of 3")
    [task] = next(m for m in slack_api.messages.values() if m.tasks).tasks.values()
    assert task["title"].startswith("mcp_fake_steps")

"""The Telegram tests' bot: its owner, its chat, and its config against the fake Bot API."""

from __future__ import annotations

import copy
from typing import Any

from iris.config import Config
from tests.chat.harness import platform_config
from tests.conftest import MakeConfig
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream

OWNER = 7
CHAT = 42
# A private chat's budget for tests about something other than pacing: the fake Bot API limits
# nothing per chat, and a conversation of many turns need not wait a second for each message.
UNPACED = {"private_chat": {"calls": 50, "per": 1.0}}


def telegram_config(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    api: FakeBotApi,
    settings: dict[str, Any] | None = None,
    **extra: Any,
) -> Config:
    """The bot's section (``settings`` merged over it) and ``extra`` config sections."""
    section: dict[str, Any] = {
        "token": api.token,
        "base_url": api.base_url,
        "allowed_users": [OWNER, "@friend"],
        "match_usernames": True,  # "@friend" by name: the documented opt-in
        "poll_timeout": 1,
        **(settings or {}),
    }
    # These tests are about edit streaming (drafts: test_native.py): pin the transport.
    display = copy.deepcopy(extra.pop("display", {}))
    display.setdefault("platforms", {}).setdefault("telegram", {}).setdefault("transport", "edit")
    return platform_config(make_config, upstream, "telegram", section, display=display, **extra)


def config(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    api: FakeBotApi,
    settings: dict[str, Any] | None = None,
    **attachments: Any,
) -> Config:
    built = telegram_config(
        make_config, upstream, api, settings, attachments={"max_edge": 256, **attachments}
    )
    return built.model_copy(update={"model": built.model.model_copy(update={"vision": True})})

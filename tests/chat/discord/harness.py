"""The Discord tests' owner, and what the fake's channels hold."""

from __future__ import annotations

from tests.fakes.discord_api import DiscordAPI

OWNER = "5000000000000001"


def contents(api: DiscordAPI) -> list[str]:
    """The text of every message the bot's channels hold, oldest first."""
    return [m.content for m in api.messages.values()]

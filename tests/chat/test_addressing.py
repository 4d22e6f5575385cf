"""Who a group message is for, as each adapter reads it, and the groups config."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from telegram import Bot, Message

from iris.config import config_from_dict
from iris.errors import ConfigError
from iris.surfaces.chat.platforms.telegram import _addressing  # pyright: ignore[reportPrivateUsage]
from tests.fakes.telegram_api import _entities  # pyright: ignore[reportPrivateUsage]

BOT_ID = 123
_BOT = Bot("123:abc")


def telegram_message(text: str) -> Message:
    """A group message as the Bot API fake sends it (entities as Telegram parses them)."""
    data = {
        "message_id": 1,
        "date": 0,
        "chat": {"id": -100, "type": "supergroup"},
        "from": {"id": 7, "is_bot": False, "first_name": "U"},
        "text": text,
        "entities": _entities(text),
    }
    message = Message.de_json(data, _BOT)
    assert message is not None
    return message


# Text around the mention: astral characters (two UTF-16 units each) shift every offset.
_AROUND = st.text(
    alphabet=st.sampled_from(["a", "b", " ", "\n", "é", "🙂", "𝄞", ",", "?"]), max_size=12
)


@given(_AROUND, _AROUND)
def test_a_mention_anywhere_is_cut_out_exactly(before: str, after: str) -> None:
    text = f"{before.rstrip('@')} @iris_bot {after}"
    addressing = _addressing(telegram_message(text), BOT_ID, "iris_bot")
    assert addressing is not None
    cut, addressed, _ = addressing
    assert addressed
    assert "iris_bot" not in cut
    assert cut == f"{before.rstrip('@')} {after}".strip()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/status@iris_bot", ("/status", True)),
        ("/model@IRIS_BOT gpt-5", ("/model gpt-5", True)),
        ("/status", ("/status", False)),  # bare: for every bot of the group
        ("hello @someone_else", ("hello @someone_else", False)),
        ("mail me at x@iris_bot.com", ("mail me at x@iris_bot.com", False)),
    ],
)
def test_commands_and_other_mentions(text: str, expected: tuple[str, bool]) -> None:
    addressing = _addressing(telegram_message(text), BOT_ID, "iris_bot")
    assert addressing is not None and addressing[:2] == expected


def test_a_command_for_another_bot_is_not_for_this_one() -> None:
    assert _addressing(telegram_message("/status@other_bot"), BOT_ID, "iris_bot") is None


def test_groups_config_defaults_and_a_clear_error() -> None:
    config = config_from_dict({"platforms": {"telegram": {"groups": {"free_channels": [-100]}}}})
    groups = config.platforms.telegram.groups
    assert (groups.respond, groups.free_channels, groups.strict_mention) == (
        "mention",
        ["-100"],
        False,
    )
    assert config.platforms.slack.queue_size == 100
    with pytest.raises(ConfigError, match=r"platforms\.discord\.groups\.respond"):
        config_from_dict({"platforms": {"discord": {"groups": {"respond": "sometimes"}}}})

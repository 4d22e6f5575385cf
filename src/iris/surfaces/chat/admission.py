"""Who the chat bot answers, and what it says to those it does not. Pure: callers pass ``now``.

A message a platform delivers is admitted in this order (``ChatSurface.receive``):

- addressing (``platforms.<name>.groups``): in a group only a message meant for the bot counts
  (a mention, a reply to it, a follow-up in a thread it answered in unless ``strict_mention``);
  one that is not is ignored without a word, as any other member's chatter;
- the allow-list (``allowed_users``): by user id, by user name only with ``match_usernames``;
  a stranger is told once per ``REFUSAL_EVERY`` seconds (``Refusals``) and nothing reaches the
  model;
- the length cap (``max_text``): a longer message is refused whole, with a note, before any
  model call (as the iris socket refuses one).
"""

from __future__ import annotations

from typing import Any

from iris.surfaces.chat.platforms.base import IncomingMessage

REFUSAL = "Sorry, this bot is private. Your user id is {user_id}."
REFUSAL_EVERY = 600.0
TOO_LONG = "⚠️ That message is {length} characters; the limit is {most}. Please send less."
_REFUSED_MEMORY = 10_000


def addressed(settings: Any, message: IncomingMessage, answered: bool) -> bool:
    """Is the message for the bot? Private chats always are. ``settings``: the platform's
    section of the config; ``answered``: the bot answered in the message's conversation.

    A follow-up in a thread the bot answered in (or that hangs from one of its messages)
    needs no mention unless ``strict_mention``: several bots in one thread each see only
    what names them."""
    groups = getattr(settings, "groups", None)
    if not message.is_group or message.addressed or groups is None:  # WhatsApp: no groups
        return True
    if groups.respond == "all" or message.chat_id in groups.free_channels:
        return True
    if groups.strict_mention or not message.thread:
        return False
    return message.bot_thread or answered


def allowed(settings: Any, message: IncomingMessage) -> bool:
    """By user id; by user name (``@`` optional, any case) only with ``match_usernames``:
    a name can be given up and taken by someone else, an id cannot."""
    entries: list[str | int] = settings.allowed_users
    # WhatsApp has no ``match_usernames``: its profile names are anyone's to choose.
    by_name = bool(getattr(settings, "match_usernames", False))
    handle = message.user_name.lstrip("@").lower() if by_name else ""
    for entry in entries:
        text = str(entry)
        if text == message.user_id or (handle and text.lstrip("@").lower() == handle):
            return True
    return False


def too_long(settings: Any, message: IncomingMessage) -> str | None:
    """The note refusing a message over ``max_text`` characters; None when it fits."""
    most: int = settings.max_text
    if len(message.text) <= most:
        return None
    return TOO_LONG.format(length=len(message.text), most=most)


class Refusals:
    """When a stranger is told the bot is private: once per ``REFUSAL_EVERY`` seconds per
    platform and user, remembering only the recent ones (strangers are unbounded)."""

    def __init__(self) -> None:
        self._told: dict[tuple[str, str], float] = {}

    def due(self, platform: str, user_id: str, now: float) -> str | None:
        """The refusal to send now, or None when this user was told recently."""
        key = (platform, user_id)
        if now - self._told.get(key, float("-inf")) < REFUSAL_EVERY:
            return None
        if len(self._told) > _REFUSED_MEMORY:
            self._told = {k: t for k, t in self._told.items() if now - t < REFUSAL_EVERY}
        self._told[key] = now
        return REFUSAL.format(user_id=user_id)

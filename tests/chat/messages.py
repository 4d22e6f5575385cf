"""Incoming chat messages as the platforms deliver them, for the runner's tests."""

from __future__ import annotations

from iris.surfaces.chat.platforms.base import IncomingMessage


def message(text_: str, *, user: str = "7", chat: str = "c1", name: str = "") -> IncomingMessage:
    return IncomingMessage("telegram", chat, user, text_, user_name=name)

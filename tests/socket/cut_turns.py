"""A turn the server stopped during (a crash, a lost owner), left in the frame log, for the repair tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iris.fanout.framelog import SqliteFrameLog
from iris.fanout.hub import Hub
from iris.protocol.types import RULES
from iris.state.sessions import SqliteSessions
from iris.state.sqlite import Store

CUT_TURN: list[dict[str, Any]] = [
    {"type": "message", "message_id": "u1", "role": "user", "text": "what colour is the sky?"},
    {"type": "typing", "on": True},
    {"type": "message.start", "message_id": "m1", "role": "assistant"},
    {"type": "message.update", "message_id": "m1", "text": "The sky is bl"},
]


async def leave_a_cut_turn(path: Path, *, question_saved: bool) -> None:
    """What a server killed mid-reply leaves: the frames devices saw, and a history that has
    the question (this server saves it when the turn begins) or nothing (an older one)."""
    store = Store(path)
    if question_saved:
        await SqliteSessions(store).append(
            "iris:main", [{"role": "user", "content": "what colour is the sky?"}]
        )
    Hub(SqliteFrameLog(store, rules=RULES)).publish_all("main", CUT_TURN)
    store.close()

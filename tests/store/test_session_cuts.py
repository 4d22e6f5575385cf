"""Session cuts: /new and compaction change what the model sees; the store keeps everything."""

from __future__ import annotations

from pathlib import Path

import pytest

from iris.agent.context import SUMMARY_PREFIX
from iris.agent.sessions import SessionStore
from iris.store import Store

pytestmark = pytest.mark.timeout(30)


def say(role: str, text: str) -> dict[str, str]:
    return {"role": role, "content": text}


async def test_a_summary_cut_heads_the_history_and_keeps_old_messages(tmp_path: Path) -> None:
    store = Store(tmp_path / "iris.db")
    sessions = SessionStore(store)
    try:
        await sessions.append("s", [say("user", "q1"), say("assistant", "a1")])
        await sessions.append("s", [say("user", "q2"), say("assistant", "a2")])
        first = await sessions.transcript("s")
        assert first.messages[0] == say("user", "q1") and first.start == 0
        await sessions.cut("s", "asked q1", after=first.cut_after(2))
        second = await sessions.transcript("s")
        assert second.messages == [
            {"role": "system", "content": SUMMARY_PREFIX + "asked q1"},
            say("user", "q2"),
            say("assistant", "a2"),
        ]
        # Compacting again replaces the earlier summary with the new one.
        await sessions.cut("s", "asked q1 and q2", after=second.cut_after(1))
        third = await sessions.transcript("s")
        assert third.messages[0]["content"].endswith("asked q1 and q2")
        assert third.messages[1:] == [say("user", "q2"), say("assistant", "a2")]
        # /new: a fresh history; every message is still in the store.
        await sessions.cut("s")
        assert await sessions.history("s") == []
        await sessions.append("s", [say("user", "q3")])
        assert await sessions.history("s") == [say("user", "q3")]
        rows = store.query("SELECT COUNT(*) AS n FROM session_messages WHERE session='s'")
        assert rows[0]["n"] == 5
    finally:
        store.close()

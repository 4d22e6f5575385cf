"""Finding 5 of the third pass: type-ahead answered an approval in ``iris chat``. Typing
"can you…" while a request appeared answered it with ``c`` ("allowed in this chat") and the
command ran. Now the prompt takes a key only once the keyboard was quiet for a moment after it
appeared (each key before that is dropped and restarts the wait), and "allow in this chat"
needs a second ``c`` to confirm. The real REPL on a pipe input and a VT100 output."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.approvals import asking, call, runs
from tests.cli.repl_session import chat_on_terminal
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(30)


async def test_keys_typed_as_the_prompt_appears_answer_nothing(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(call(), text("Not run."))
    async with chat_on_terminal(asking(make_config, upstream, tmp_path)) as s:
        screen = s.chat.screen
        screen.arm_after = 3600  # the person keeps typing: the prompt never arms meanwhile
        s.type("go\r")
        await s.see("keys typed before this are ignored")
        s.type("can you")
        await s.see(lambda _: screen.ignored == 7)
        assert runs(tmp_path) == 0
        assert len(upstream.requests) == 1, "the request still waits"
        screen.arm_after = 0  # the keyboard went quiet: now the prompt takes keys
        await s.see(lambda t: screen.armed() and "n/Enter deny" in t)
        s.type("c")
        await s.see(lambda t: screen.confirming and "c again" in t)
        s.type("x")  # anything but c goes back: nothing was allowed
        shown = await s.see(lambda _: not screen.confirming)
        assert "allowed" not in shown[shown.rindex("waits for your approval") :]
        s.type("n")
        shown = await s.replies(1)
        assert "denied by" in shown
    assert runs(tmp_path) == 0

"""Finding 4 of the third pass: the approval preview was exact but spoofable.

``echo ok \\u200b# ; touch X`` (also with a no-break space or a bidi override before ``#``)
looked like ``echo ok`` and a comment on every surface, and ran ``touch``; in ``iris chat``
backspaces in a command overwrote what the terminal showed, and ``y`` ran it; a long command
split over several messages hid whether a space lay at a cut. Now every surface draws a hidden
character as ``⟨U+XXXX⟩`` under a warning line, and marks each cut ``⟨cut⟩``: the person sees
what the shell reads. (The web card: ``tests/web/test_approval.py``; the Textual card:
``tests/app/test_approval_app.py``; the rule's twins: ``tests/webjs/*visible*``.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iris.formats.visible import CUT, hidden, read_back, shown, warning
from iris.surfaces.chat.prompts import render
from iris.surfaces.chat.splitter import measure
from tests.chat import approval_chats as e2e
from tests.chat.approval_chats import USERS, Chat, closed, ran, the_prompt
from tests.cli.repl_session import chat_on_terminal, streaming
from tests.conftest import MakeConfig, anywhere
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning"),
]

SPOOFS = {
    "zero-width space": "echo ok \u200b# ; echo ran >> approved",
    "no-break space": "echo ok\u00a0# ; echo ran >> approved",
    "bidi override": "echo ok \u202e# ; echo ran >> approved",
}
# Hidden characters, and ones that look like the markers.
TRICKY = st.sampled_from(
    ["\u200b", "\u200d", "\u202e", "\u2066", "\u00a0", "\u3000", "\r", "\b", "\x1b", "\x7f",
     "\x85", "\u2028", "\ufeff", "\ufe0f", "\u3164", "\U000e0041", "\ud800", "⟨", "⟩", "U+200B"]
)  # fmt: skip
# The chat platforms' fixtures (Telegram, Discord, Slack against their fakes).
chat = e2e.chat
approval_timeout = e2e.approval_timeout
COMMANDS = st.lists(st.one_of(st.text(max_size=8), TRICKY), max_size=40).map("".join)


@given(command=COMMANDS)
def test_any_command_as_shown_maps_back_to_exactly_its_bytes(command: str) -> None:
    drawn = shown(command)
    assert read_back(drawn).encode("utf-8", "surrogatepass") == command.encode(
        "utf-8", "surrogatepass"
    )
    assert not any(hidden(c) for c in drawn), "nothing hidden is left in what is drawn"
    assert bool(warning(command)) == any(hidden(c) for c in command)


@given(command=COMMANDS, limit=st.integers(min_value=300, max_value=1000))
def test_a_command_split_over_messages_maps_back_and_marks_every_cut(
    command: str, limit: int
) -> None:
    body = command * 8
    rendered = render("terminal", body, 60, "0123456789abcdef", limit=limit, unit="utf16")
    if not rendered.parts:
        return
    assert all(measure(part, "utf16") <= limit for part in rendered.parts)
    assert read_back("".join(rendered.parts).replace(CUT, "")) == body
    for before, after in zip(rendered.parts, rendered.parts[1:], strict=False):
        assert before.endswith(CUT) and after.startswith(CUT)
    if warning(body):
        assert warning(body) in rendered.prompt.text


@pytest.mark.parametrize("spoof", list(SPOOFS), ids=list(SPOOFS))
async def test_a_chat_prompt_shows_the_hidden_character_and_warns(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path, spoof: str
) -> None:
    owner = USERS[chat.name][0]
    command = SPOOFS[spoof]
    upstream.script(tool_call("terminal", [json.dumps({"command": command})]), text("Done."))
    await chat.say(owner, "check")
    prompt = await the_prompt(chat)
    assert shown(command) in prompt.text, "the hidden character is drawn as its code point"
    assert "⚠ Holds 1 hidden or control character" in prompt.text
    assert "echo ok # ; echo" not in prompt.text.replace("\u00a0", " ")
    await chat.press(prompt.message_id, prompt.buttons["Deny"], owner)
    await closed(chat, prompt)
    assert ran(tmp_path) == 0


async def test_a_space_at_a_cut_between_two_messages_is_seen(
    chat: Chat, upstream: FakeUpstream, tmp_path: Path
) -> None:
    owner = USERS[chat.name][0]
    words = " ".join(f"w{i}" for i in range(900))  # longer than any platform's prompt
    command = f"echo {words} > /dev/null; echo ran >> approved"
    upstream.script(tool_call("terminal", [json.dumps({"command": command})]), text("Done."))
    await chat.say(owner, "check")
    prompt = await the_prompt(chat)
    parts = [m.text for m in chat.messages() if CUT in m.text and m.message_id != prompt.message_id]
    assert len(parts) >= 2 and "cut at ⟨cut⟩" in prompt.text
    # The first part ends at a space: the mark shows it ("w… ⟨cut⟩"), the next starts on it.
    assert parts[0].endswith(f" {CUT}") and parts[1].startswith(CUT)
    # The parts, marks taken out, are the exact preview: the command, then how it runs.
    runs_in = f"(runs in the sandbox: workspace {tmp_path / 'ws'}, no network)"
    assert "".join(parts).replace(CUT, "") == f"{command}\n\n{runs_in}"
    await chat.press(prompt.message_id, prompt.buttons["Deny"], owner)
    await closed(chat, prompt)


@pytest.mark.parametrize(
    "command",
    [
        SPOOFS["zero-width space"],
        "printf safe\b\b\b\b\b\b\b\b\b\b\b\brm -rf x; echo ran >> runs.txt",
    ],
    ids=["zero-width", "backspaces"],
)
async def test_iris_chat_shows_what_the_shell_reads_before_y(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path, command: str
) -> None:
    upstream.script(
        tool_call("terminal", [json.dumps({"command": command})], content="Checking."),
        text("Not run."),
    )
    config = streaming(
        make_config,
        upstream,
        tools={"terminal": {"cwd": str(tmp_path)}, "approval": {"mode": "ask", "timeout": 30}},
    )
    async with chat_on_terminal(config) as s:
        s.type("go\r")
        screen = await s.see("n/Enter deny")
        assert "hidden or control character" in screen
        assert shown(command) in screen
        raw = "".join(s.term.out.writes)
        # (prompt_toolkit moves its cursor with backspaces of its own.)
        assert "safe\b" not in raw and "\u200b" not in raw, "nothing hidden reached the terminal"
        s.type("n")
        await s.replies(1)
    assert not anywhere(tmp_path, "runs.txt") and not anywhere(tmp_path, "approved")

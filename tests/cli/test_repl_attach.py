"""Files from ``iris chat``: ``/attach PATH`` or a path pasted alone on a line goes with the next
message, through the attachment pipeline every surface uses, with its caps and its lines for the
user (the real REPL, the real agent, the scripted fake upstream over HTTP)."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest

from iris.agent.attachments import placeholder
from iris.protocol.types import MAX_ATTACHMENTS
from iris.surfaces.cli.repl import Chat, LinePrompt
from iris.surfaces.cli.screen import PlainScreen
from iris.surfaces.cli.staged import path_of, split_paths
from tests.chat.attachments import photo
from tests.cli.repl_session import chat_on_terminal, streaming
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(30)


async def plain_chat(config: Any, *lines: str) -> str:
    """Run the REPL without a terminal on ``lines``; what it told the user (stderr's side)."""
    out, info = io.StringIO(), io.StringIO()
    chat = Chat(
        config, LinePrompt(io.StringIO("".join(f"{x}\n" for x in lines))), PlainScreen(out, info)
    )
    assert await asyncio.wait_for(chat.run(), 15) == 0
    return info.getvalue()


def last_user(upstream: FakeUpstream, n: int = -1) -> Any:
    return upstream.requests[n].body["messages"][-1]["content"]


async def test_attach_sends_the_file_with_the_next_message(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("the launch is on Tuesday")
    upstream.script(text("Tuesday."), text("Nothing else."))
    told = await plain_chat(
        streaming(make_config, upstream), f"/attach {notes}", "/attach", "when?", "and?"
    )
    assert "📎 notes.txt (< 1 KB) goes with your next message" in told
    assert "with your next message: notes.txt" in told
    sent = last_user(upstream, 0)
    assert "when?" in sent and "the launch is on Tuesday" in sent and 'name="notes.txt"' in sent
    assert last_user(upstream) == "and?"  # the file went once, with the message after it


async def test_a_path_pasted_alone_on_a_line_is_attached_not_sent_as_text(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> None:
    folder = tmp_path / "My Files"
    folder.mkdir()
    doc = folder / "plan.md"
    doc.write_text("# Plan\nship it")
    upstream.script(text("A plan."))
    # A terminal pastes a dragged file's path quoted, or with its spaces escaped.
    told = await plain_chat(streaming(make_config, upstream), f"'{doc}'", "what is this?")
    assert "📎 plan.md" in told
    [request] = upstream.requests
    sent = request.body["messages"][-1]["content"]
    assert "what is this?" in sent and "ship it" in sent
    assert str(doc) not in sent
    assert split_paths(f"look:\n{str(doc).replace(' ', chr(92) + ' ')}") == ("look:", [doc])
    assert path_of(doc.as_uri()) == doc


async def test_on_the_terminal_a_message_with_a_pasted_path_line_sends_both(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> None:
    doc = tmp_path / "todo.txt"
    doc.write_text("buy milk")
    upstream.script(text("Milk."))
    async with chat_on_terminal(streaming(make_config, upstream)) as s:
        s.type(f"what is on it?\x1b\r{doc}\r")  # Alt-Enter, then the pasted path
        await s.see("📎 todo.txt")
        await s.replies(1)
    sent = last_user(upstream)
    assert "what is on it?" in sent and "buy milk" in sent and str(doc) not in sent


async def test_what_the_model_cannot_take_is_said_to_the_user_and_the_model(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> None:
    picture = tmp_path / "cat.png"
    picture.write_bytes(photo(8, 8, "PNG"))
    upstream.script(text("I cannot see it."))
    told = await plain_chat(streaming(make_config, upstream), f"/attach {picture}", "look")
    line = "cat.png: this model does not see images (model.vision is off)"
    assert line in told
    assert f"[attachment not included: {line}]" in last_user(upstream)


async def test_an_image_reaches_a_model_that_sees_and_the_history_keeps_a_placeholder(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> None:
    picture = tmp_path / "cat.png"
    picture.write_bytes(photo(8, 8, "PNG"))
    upstream.script(text("A cat."), text("Yes."))
    config = make_config(upstream.base_url, model={"vision": True}, streaming={"cli": True})
    await plain_chat(config, f"/attach {picture}", "what is it?", "sure?")
    parts = last_user(upstream, 0)
    assert [p["type"] for p in parts] == ["text", "image_url"]
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    kept = upstream.requests[1].body["messages"][-3]["content"]
    assert placeholder("cat.png") in kept


async def test_the_caps_are_said_at_once_and_nothing_is_sent_for_them(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 5000)
    small = tmp_path / "a.txt"
    small.write_text("a")
    config = make_config(
        upstream.base_url, attachments={"max_bytes": 4096}, streaming={"cli": True}
    )
    attach = [f"/attach {small}"] * (MAX_ATTACHMENTS + 1)
    missing = tmp_path / "gone.txt"
    told = await plain_chat(config, f"/attach {big}", f"/attach {missing}", *attach)
    assert "big.bin: too large (5000 bytes; the limit is 4096)" in told
    assert f"{missing}: no such file" in told
    assert f"a.txt: at most {MAX_ATTACHMENTS} files a message" in told
    assert told.count("📎 a.txt") == MAX_ATTACHMENTS
    assert upstream.requests == []  # attaching sends nothing by itself


async def test_a_word_or_a_relative_name_alone_is_still_a_message(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path, monkeypatch: Any
) -> None:
    (tmp_path / "notes.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    upstream.script(text("ok"), text("ok"))
    await plain_chat(streaming(make_config, upstream), "notes.txt", "/etc/no-such-file")
    assert [last_user(upstream, n) for n in (0, 1)] == ["notes.txt", "/etc/no-such-file"]

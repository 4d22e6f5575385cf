"""Files from the terminal app: F3 opens a file picker (a folder tree, or a typed path), the file
goes with the next message as ``message.send``'s ``attachments`` with the browser's caps and
lines (``iris.app.core.attach``), and against the real server the model gets it — or the user
is told, as on every surface, what it did not get."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image
from textual.widgets import DirectoryTree, Input

from iris.app.app import IrisApp
from iris.app.attach_screen import AttachScreen
from iris.app.core.attach import MAX_EDGE, MAX_FILES, MAX_FRAME_B64, Attachments
from tests.chat.attachments import photo
from tests.fakes.iris_server import FakeIrisServer
from tests.fakes.upstream import FakeUpstream, text

from .driver import SIZE, bubbles, make_app, screen_text, until

pytestmark = pytest.mark.timeout(30)


async def pick(app: IrisApp, pilot: object, path: Path) -> None:
    """F3, then the path typed into the picker's field and Enter."""
    await pilot.press("f3")  # type: ignore[attr-defined]
    await until(pilot, lambda: isinstance(app.screen, AttachScreen), within=10)  # type: ignore[arg-type]
    app.screen.query_one("#path", Input).value = str(path)
    await pilot.press("enter")  # type: ignore[attr-defined]
    await until(pilot, lambda: not isinstance(app.screen, AttachScreen), within=10)  # type: ignore[arg-type]


async def test_f3_attaches_a_file_that_goes_with_the_next_message(
    server: FakeIrisServer, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("the launch is on Tuesday")
    app = make_app(server.url)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected, within=10)
        await pick(app, pilot, notes)
        await until(pilot, lambda: "📎 notes.txt" in screen_text(app), within=10)
        await pilot.click("#composer")
        await pilot.press(*"when?", "enter")
        sent = await server.wait_for("message.send")
        assert sent["text"] == "when?"
        [file] = sent["attachments"]
        assert file == {
            "kind": "file",
            "name": "notes.txt",
            "mime": "text/plain",
            "data_b64": base64.b64encode(b"the launch is on Tuesday").decode(),
        }
        await until(pilot, lambda: "📎 notes.txt" not in screen_text(app), within=10)
        [mine] = bubbles(app)
        assert mine.bubble.text == "when?\n[attached: notes.txt]"  # as the browser shows it


async def test_the_picker_tree_picks_a_file_and_escape_picks_nothing(
    server: FakeIrisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    monkeypatch.chdir(tmp_path)
    app = make_app(server.url)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected, within=10)
        await pilot.press("f3")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen), within=10)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, AttachScreen), within=10)
        assert app.attachments.count == 0
        await pilot.press("ctrl+t")  # the same, for terminals that take F-keys
        await until(pilot, lambda: isinstance(app.screen, AttachScreen), within=10)
        tree = app.screen.query_one(DirectoryTree)
        await until(
            pilot, lambda: any(n.data and n.data.path.name == "a.txt" for n in tree.root.children)
        )
        tree.focus()
        [node] = [n for n in tree.root.children if n.data and n.data.path.name == "a.txt"]
        tree.move_cursor(node)
        await pilot.press("enter")
        await until(pilot, lambda: app.attachments.names == ["a.txt"], within=10)
        await pilot.press("f4")  # clears
        await until(
            pilot, lambda: app.attachments.count == 0 and "📎" not in screen_text(app), within=10
        )


async def test_what_cannot_go_is_said_in_the_browsers_words(
    server: FakeIrisServer, tmp_path: Path
) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"\0" * (MAX_FRAME_B64 * 3 // 4 + 10_000))
    app = make_app(server.url)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected, within=10)
        await pick(app, pilot, big)
        await until(pilot, lambda: "⚠ big.bin: too large to send" in screen_text(app), within=10)
        assert "a message carries about" in screen_text(app)
        await pick(app, pilot, tmp_path / "gone.txt")
        # The line names the whole path (it may wrap on screen).
        await until(pilot, lambda: app.attachments.problem.endswith("gone.txt: no such file"))
        assert "⚠ " in screen_text(app) and "big.bin" not in screen_text(app)
        assert app.attachments.count == 0
        await pilot.click("#composer")
        await pilot.press("enter")  # nothing typed, nothing attached: nothing is sent
        assert server.sent_by_app("message.send") == []


def test_a_large_photo_is_downscaled_to_fit_and_the_ninth_file_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "photo.png"
    smooth = Image.effect_noise((300, 200), 64).convert("RGB")
    smooth.resize((3000, 2000), Image.Resampling.BICUBIC).save(big, "PNG")
    assert big.stat().st_size > MAX_FRAME_B64  # as it is, it would not fit the frame
    attachments = Attachments()
    assert attachments.add(big), attachments.problem
    [sent] = attachments.files
    assert sent["kind"] == "image" and sent["mime"] == "image/jpeg"
    with Image.open(io.BytesIO(base64.b64decode(sent["data_b64"]))) as image:
        assert max(image.size) == MAX_EDGE
    small = tmp_path / "dot.png"
    small.write_bytes(photo(4, 4, "PNG"))
    for _ in range(MAX_FILES - 1):
        assert attachments.add(small)
    assert not attachments.add(small)
    assert attachments.problem == f"dot.png: at most {MAX_FILES} files a message"


async def test_against_the_real_server_the_model_gets_the_file_or_the_user_is_told(
    iris_url: str, upstream: FakeUpstream, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("the launch is on Tuesday")
    picture = tmp_path / "cat.png"
    picture.write_bytes(photo(8, 8, "PNG"))
    upstream.script(text("Tuesday."))
    app = make_app(iris_url, "device-token-0123456789", smoothness=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.connection.connected, within=10)
        await pick(app, pilot, notes)
        await pick(app, pilot, picture)
        await pilot.click("#composer")
        await pilot.press(*"when?", "enter")
        line = "cat.png: this model does not see images (model.vision is off)"
        await until(pilot, lambda: line in screen_text(app), within=15)
        await until(pilot, lambda: "Tuesday." in screen_text(app), within=15)
    sent = upstream.requests[-1].body["messages"][-1]["content"]
    assert "when?" in sent and "the launch is on Tuesday" in sent
    assert f"[attachment not included: {line}]" in sent

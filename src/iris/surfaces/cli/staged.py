"""Files the terminal chat sends with the next message: ``/attach PATH``, or a path pasted (or a
file dragged onto the terminal, which pastes its path) alone on a line of its own.

A path is read as a terminal pastes one: quoted (``'My File.png'``), with escaped spaces
(``My\\ File.png``), as a ``file://`` URI, or starting with ``~``. A pasted line is a path only
when it names a file that exists; anything else stays text for the model. The caps are every
surface's: at most :data:`MAX_ATTACHMENTS` files a message and ``attachments.max_bytes`` each
(said at once, the file never read); what the model cannot take of a file it got (an image for
a model that sees none, audio with no transcription) is said when the message goes, by
:func:`iris.agent.attachments.prepare`, as on the other surfaces.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from iris.agent.attachments import File, read_path
from iris.protocol.types import MAX_ATTACHMENTS

_ESCAPED = re.compile(r"\\(.)")


def path_of(written: str) -> Path:
    """The path a user typed or pasted, unquoted."""
    text = written.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    elif text.startswith("file://"):
        text = unquote(urlparse(text).path)
    else:
        text = _ESCAPED.sub(r"\1", text)  # `My\ File.png`, as a shell would read it
    return Path(text).expanduser()


def pasted_path(line: str) -> Path | None:
    """The file a line names when the line is only that: an absolute path (or one from ``~``)
    to a file that exists. A bare relative name (``notes.txt``) stays text: it is as likely a
    word as a file."""
    path = path_of(line)
    if not line.strip() or not path.is_absolute():
        return None
    return path if _is_file(path) else None


def split_paths(message: str) -> tuple[str, list[Path]]:
    """``message`` less its lines that are each a pasted path, and those paths."""
    kept: list[str] = []
    paths: list[Path] = []
    for line in message.split("\n"):
        path = pasted_path(line)
        if path is None:
            kept.append(line)
        else:
            paths.append(path)
    return "\n".join(kept).strip("\n"), paths


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long to be a path, say
        return False


class Staged:
    """The files that go with the next message, in the order they were attached."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.files: list[File] = []

    def add(self, path: Path) -> str:
        """Attach the file at ``path``; the line the user is told either way."""
        if len(self.files) >= MAX_ATTACHMENTS:
            return f"{path.name}: at most {MAX_ATTACHMENTS} files a message"
        try:
            file = read_path(path, self.max_bytes)
        except ValueError as exc:
            return str(exc)
        self.files.append(file)
        size = f"{len(file.data) / 1024:.0f} KB" if len(file.data) >= 1024 else "< 1 KB"
        return f"📎 {file.name} ({size}) goes with your next message"

    def listing(self) -> str:
        if not self.files:
            return "no files attached; /attach PATH (or paste a path alone on a line) adds one"
        names = ", ".join(file.name for file in self.files)
        return f"📎 with your next message: {names}"

    def take(self) -> list[File]:
        files, self.files = self.files, []
        return files

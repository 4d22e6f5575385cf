"""Files attached to the next message in the terminal app — the rules of the browser's
``src/iris/web/js/attach.js``: at most :data:`MAX_FILES` a message, images downscaled to
:data:`MAX_EDGE` on their longer edge so a photo fits the socket's 1 MiB frame, and what still
does not fit refused here with a line saying so (in the browser's words), rather than closing
the socket. What the model makes of each file is the server's (``attachments.*``): it says so
in a note, as it does for every device.
"""

from __future__ import annotations

import contextlib
import math
import mimetypes
from base64 import b64decode, b64encode
from pathlib import Path

from iris.agent.attachments import image_url, kind_of, read_path
from iris.protocol.types import MAX_ATTACHMENTS, SentFile

MAX_EDGE = 2048
MAX_FILES = MAX_ATTACHMENTS  # the server's limit for one message
# Base64 of every file of one message together: the frame's 1 MiB, less room for the text.
MAX_FRAME_B64 = 1_000_000 - 40_000
# Read at most this much of one file: an image this large may still shrink to fit; anything
# else over the frame is refused from its size alone.
READ_LIMIT = 20_000_000


class Attachments:
    """The files that go with the next message, and the last problem to show (or "")."""

    def __init__(self) -> None:
        self.files: list[SentFile] = []
        self.problem = ""

    @property
    def count(self) -> int:
        return len(self.files)

    @property
    def names(self) -> list[str]:
        return [file["name"] for file in self.files]

    def add(self, path: Path) -> bool:
        """Read the file at ``path`` into the list; False (and ``problem`` says why) if not."""
        name = path.name or str(path)
        if len(self.files) >= MAX_FILES:
            return self._refuse(f"{name}: at most {MAX_FILES} files a message")
        guessed = mimetypes.guess_type(name)[0] or ""
        with contextlib.suppress(OSError):  # read_path says what is wrong with the path
            if kind_of(guessed) != "image" and not self._fits(path.stat().st_size):
                return self._refuse(self._too_large(name, path.stat().st_size))
        try:
            file = read_path(path, READ_LIMIT)
        except ValueError as exc:
            return self._refuse(str(exc))
        mime, data = file.mime, file.data
        if file.kind == "image":
            with contextlib.suppress(ValueError):  # not decodable here: the server will say
                head, encoded = image_url(data, MAX_EDGE).split(",", 1)
                mime, data = head.removeprefix("data:").removesuffix(";base64"), b64decode(encoded)
        if not self._fits(len(data)):
            return self._refuse(self._too_large(name, len(data)))
        self.problem = ""
        sent: SentFile = {
            "kind": kind_of(mime),
            "name": name,
            "mime": mime,
            "data_b64": b64encode(data).decode(),
        }
        self.files.append(sent)
        return True

    def _fits(self, size: int) -> bool:
        used = sum(len(sent["data_b64"]) for sent in self.files)
        return used + math.ceil(size / 3) * 4 <= MAX_FRAME_B64

    @staticmethod
    def _too_large(name: str, size: int) -> str:
        carries = math.floor(MAX_FRAME_B64 * 0.75 / 1024)
        return f"{name}: too large to send ({math.ceil(size / 1024)} KB; a message carries about {carries} KB)"

    def _refuse(self, problem: str) -> bool:
        self.problem = problem
        return False

    def take(self) -> list[SentFile]:
        """The files for ``message.send``; the list empties."""
        files, self.files, self.problem = self.files, [], ""
        return files

    def restore(self, files: list[SentFile]) -> None:
        """Put back files whose message could not be sent."""
        self.files = [*files, *self.files]

    def clear(self) -> None:
        self.files, self.problem = [], ""

"""Read a GGUF file's metadata (its key/value header) without loading the model.

The embedded provider asks one thing of it: whether the model ships a chat template
(``tokenizer.chat_template``). llama.cpp's server cannot say so: without one it reports its own
fallback (ChatML), which a base model does not know. The format:
https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from iris.errors import ProviderError

MAGIC = b"GGUF"
CHAT_TEMPLATE = "tokenizer.chat_template"

# Value types: sizes of the fixed-width ones; 8 is a string, 9 an array.
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING = 8
_ARRAY = 9


class _Reader:
    def __init__(self, file: BinaryIO) -> None:
        self.file = file

    def take(self, n: int) -> bytes:
        data = self.file.read(n)
        if len(data) != n:
            raise ValueError("truncated header")
        return data

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def string(self) -> bytes:
        return self.take(self.u64())

    def skip(self, kind: int) -> None:
        if kind in _FIXED:
            self.file.seek(_FIXED[kind], 1)
        elif kind == _STRING:
            self.file.seek(self.u64(), 1)
        elif kind == _ARRAY:
            inner, count = self.u32(), self.u64()
            if inner in _FIXED:
                self.file.seek(_FIXED[inner] * count, 1)
            else:
                for _ in range(count):
                    self.skip(inner)
        else:
            raise ValueError(f"unknown value type {kind}")


def string_values(path: Path, keys: set[str]) -> dict[str, str]:
    """The string values of ``keys`` in the GGUF at ``path`` (absent keys are left out)."""
    found: dict[str, str] = {}
    try:
        with path.open("rb") as file:
            reader = _Reader(file)
            if reader.take(4) != MAGIC:
                raise ValueError("not a GGUF file")
            version = reader.u32()
            if version < 2:
                raise ValueError(f"GGUF version {version} is too old")
            reader.u64()  # tensor count
            for _ in range(reader.u64()):
                key = reader.string().decode("utf-8", "replace")
                kind = reader.u32()
                if key in keys and kind == _STRING:
                    found[key] = reader.string().decode("utf-8", "replace")
                else:
                    reader.skip(kind)
    except (OSError, ValueError, struct.error) as exc:
        raise ProviderError(f"cannot read the model file {path}: {exc}") from None
    return found


def chat_template(path: Path) -> str | None:
    """The model's own chat template, or None when it has none (a base model)."""
    return string_values(path, {CHAT_TEMPLATE}).get(CHAT_TEMPLATE) or None

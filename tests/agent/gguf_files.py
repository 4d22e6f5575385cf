"""GGUF files for tests: a bare header of chosen keys, or a real model with one key added."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import BinaryIO

_STRING, _U32, _ARRAY = 8, 4, 9


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def string_kv(key: str, value: str) -> bytes:
    return _string(key) + struct.pack("<I", _STRING) + _string(value)


def header(kvs: list[bytes], tensors: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, tensors, len(kvs)) + b"".join(kvs)


def token_array_kv(key: str, tokens: list[str]) -> bytes:
    """An array of strings, as the vocabulary is stored (the reader must skip it)."""
    items = b"".join(_string(t) for t in tokens)
    return _string(key) + struct.pack("<IIQ", _ARRAY, _STRING, len(tokens)) + items


def u32_kv(key: str, value: int) -> bytes:
    return _string(key) + struct.pack("<II", _U32, value)


class _Scan:
    def __init__(self, file: BinaryIO) -> None:
        self.file = file

    def take(self, n: int) -> bytes:
        return self.file.read(n)

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def value(self, kind: int) -> int | None:
        """Skip one value; return it when it is a u32 (the alignment is one)."""
        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        if kind == _U32:
            return self.u32()
        if kind in sizes:
            self.take(sizes[kind])
        elif kind == _STRING:
            self.take(self.u64())
        elif kind == _ARRAY:
            inner, count = self.u32(), self.u64()
            for _ in range(count):
                self.value(inner)
        return None


def with_string_key(source: Path, target: Path, key: str, value: str) -> Path:
    """A copy of the GGUF ``source`` with the string ``key`` added to its header. Tensor offsets
    are relative to the data section, so the tensors are copied as they are, realigned."""
    with source.open("rb") as file:
        scan = _Scan(file)
        assert scan.take(4) == b"GGUF"
        version, tensors, count = scan.u32(), scan.u64(), scan.u64()
        start = file.tell()
        alignment = 32
        for _ in range(count):
            name = scan.take(scan.u64()).decode()
            found = scan.value(scan.u32())
            if name == "general.alignment" and found is not None:
                alignment = found
        end_kvs = file.tell()
        for _ in range(tensors):
            scan.take(scan.u64())
            dims = scan.u32()
            scan.take(8 * dims + 4 + 8)
        end_infos = file.tell()
        data = end_infos + (-end_infos % alignment)
        file.seek(start)
        kvs = file.read(end_kvs - start)
        infos = file.read(end_infos - end_kvs)
        head = b"GGUF" + struct.pack("<IQQ", version, tensors, count + 1)
        out = head + kvs + string_kv(key, value) + infos
        out += b"\0" * (-len(out) % alignment)
        with target.open("wb") as copy:
            copy.write(out)
            file.seek(data)
            shutil.copyfileobj(file, copy, 1 << 20)
    return target

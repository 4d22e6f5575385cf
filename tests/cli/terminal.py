"""A recording terminal for the REPL tests: prompt_toolkit's pipe input and a real VT100 output.

``Terminal.out`` stands in for stdout. prompt_toolkit's ``Vt100_Output`` buffers and writes once
per flush, so ``writes`` counts the terminal writes a user's terminal would receive. ``text``
is everything written with the escape sequences taken out.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import PipeInput
from prompt_toolkit.output.vt100 import Vt100_Output

_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>78]|\x1b\([AB0]")


def strip_ansi(text: str) -> str:
    return _ESCAPE.sub("", text).replace("\r", "")


class Recorder:
    """A fake stdout that keeps every write and wakes waiters."""

    encoding = "utf-8"

    def __init__(self) -> None:
        self.writes: list[str] = []
        self._changed = asyncio.Event()

    def write(self, data: str) -> int:
        self.writes.append(data)
        self._changed.set()
        return len(data)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("no file descriptor")

    @property
    def raw(self) -> str:
        return "".join(self.writes)

    @property
    def text(self) -> str:
        return strip_ansi(self.raw)

    async def wait_for(self, check: str | Callable[[str], bool], within: float = 15.0) -> str:
        """Wait until the visible text contains ``check`` (or satisfies it); fail after ``within`` s."""

        def done() -> bool:
            text = self.text
            return check in text if isinstance(check, str) else check(text)

        async def wait() -> None:
            while not done():
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(wait(), within)
        except TimeoutError:
            raise AssertionError(
                f"never saw {check!r} on the terminal; it shows:\n{self.text}"
            ) from None
        return self.text


class Terminal:
    def __init__(self, pipe: PipeInput, columns: int = 80) -> None:
        self.input = pipe
        self.out = Recorder()
        self.output = Vt100_Output(
            self.out,  # pyright: ignore[reportArgumentType]
            lambda: Size(rows=40, columns=columns),
            term="xterm-256color",
            enable_cpr=False,
        )

    def type(self, keys: str) -> None:
        self.input.send_text(keys)

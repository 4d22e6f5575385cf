"""``iris chat -q PROMPT``: one reply to stdout, streamed as it arrives; everything else to stderr.

stdout carries only the answer, so ``iris chat -q … > answer.txt`` is clean: reasoning, tool
activity, the demo-model notice and errors go to stderr.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import TextIO, assert_never

from iris.agent import Agent, TurnRequest
from iris.config import Config
from iris.events import (
    Commentary,
    Event,
    ReasoningDelta,
    SegmentEnded,
    StreamReset,
    TextDelta,
    ToolEnded,
    ToolProgress,
    ToolStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.llm.local import DEMO_NOTICE
from iris.surfaces.cli.render import tool_label


def run_oneshot(config: Config, prompt: str) -> int:
    return asyncio.run(_oneshot(config, prompt, sys.stdout, sys.stderr))


async def _oneshot(config: Config, prompt: str, out: TextIO, err: TextIO) -> int:
    stream = config.streams("cli")
    show_reasoning = config.display_for("cli").show_reasoning
    if config.model.provider == "local":
        print(f"iris: {DEMO_NOTICE}", file=err)
    agent = Agent(config)
    request = TurnRequest(messages=[{"role": "user", "content": prompt}], stream=stream)
    code = 1
    try:
        async with agent.run(request) as turn:
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGINT, turn.interrupt)
            printer = _Printer(out, err, stream=stream, show_reasoning=show_reasoning)
            async for event in turn:
                code = printer.handle(event)
            loop.remove_signal_handler(signal.SIGINT)
    finally:
        await agent.aclose()
    return code


class _Printer:
    def __init__(self, out: TextIO, err: TextIO, *, stream: bool, show_reasoning: bool) -> None:
        self.out, self.err = out, err
        self.stream = stream
        self.show_reasoning = show_reasoning
        self.line_open = False  # the last thing written to stdout did not end a line
        self.reasoning_open = False

    def _write(self, text: str) -> None:
        if self.reasoning_open:
            self.err.write("\n")
            self.reasoning_open = False
        self.out.write(text)
        self.out.flush()
        self.line_open = not text.endswith("\n")

    def handle(self, event: Event) -> int:
        """Render one event; return the exit code the turn would have if it ended here."""
        match event:
            case TurnStarted() | SegmentEnded():
                pass
            case TextDelta(text=text):
                if self.stream:
                    self._write(text)
            case ReasoningDelta(text=text):
                if self.show_reasoning:
                    self.err.write(text)
                    self.err.flush()
                    self.reasoning_open = True
            case Commentary(text=text):
                if not self.stream:
                    self._write(text)
                self._write("\n\n")
            case StreamReset(reason=reason):
                # stdout cannot be unprinted: say so, then the answer restarts on a new line.
                if self.line_open:
                    self._write("\n")
                self.err.write(f"iris: {reason}; the answer restarts\n")
            case ToolStarted(name=name, args=args):
                self.err.write(tool_label(name, args, verbose=False) + "\n")
            case ToolProgress():
                pass
            case ToolEnded(ok=ok, duration=duration):
                self.err.write(f"  {'✓' if ok else '✗'} {duration:.1f} s\n")
            case TurnEnded(text=text, reason=reason):
                if not self.stream and text:
                    self._write(text)
                if self.line_open:
                    self._write("\n")
                if reason == "interrupted":
                    self.err.write("iris: interrupted\n")
                    return 130
                if reason == "length":
                    self.err.write("iris: the answer was cut at model.max_output_chars\n")
                return 0
            case TurnFailed(message=message, partial_text=partial):
                if not self.stream and partial:
                    self._write(partial)
                if self.line_open:
                    self._write("\n")
                self.err.write(f"iris: {message}\n")
                return 1
            case _:
                assert_never(event)
        return 1

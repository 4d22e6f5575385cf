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
    ApprovalRequested,
    ApprovalResolved,
    ElicitationRequested,
    ElicitationResolved,
    Event,
    ReasoningDelta,
    StreamReset,
    ToolCallDelta,
    ToolEnded,
    ToolProgress,
    ToolStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.llm.local import DEMO_NOTICE
from iris.segments import (
    Item,
    SegmentClosed,
    SegmentGrown,
    SegmentOpened,
    SegmentReset,
    Segments,
)
from iris.surfaces.cli.render import tool_label


def run_oneshot(config: Config, prompt: str) -> int:
    return asyncio.run(_oneshot(config, prompt, sys.stdout, sys.stderr))


async def _oneshot(config: Config, prompt: str, out: TextIO, err: TextIO) -> int:
    stream = config.streams("cli")
    show_reasoning = config.display_for("cli").show_reasoning
    if config.model.provider == "local":
        print(f"iris: {DEMO_NOTICE}", file=err)
    agent = Agent(config)
    request = TurnRequest(
        messages=[{"role": "user", "content": prompt}], stream=stream, metadata={"surface": "cli"}
    )
    code = 1
    try:
        await agent.start_tools()
        async with agent.run(request) as turn:
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGINT, turn.interrupt)
            printer = Printer(out, err, stream=stream, show_reasoning=show_reasoning)
            async for event in turn:
                code = printer.handle(event)
            loop.remove_signal_handler(signal.SIGINT)
    finally:
        await agent.aclose()
    return code


class Printer:
    def __init__(self, out: TextIO, err: TextIO, *, stream: bool, show_reasoning: bool) -> None:
        self.out, self.err = out, err
        self.stream = stream
        self.show_reasoning = show_reasoning
        self.line_open = False  # the last thing written to stdout did not end a line
        self.reasoning_open = False
        self.segments = Segments()
        self.code = 1

    def _write(self, text: str) -> None:
        if self.reasoning_open:
            self.err.write("\n")
            self.reasoning_open = False
        self.out.write(text)
        self.out.flush()
        self.line_open = not text.endswith("\n")

    def handle(self, event: Event) -> int:
        """Render one event; return the exit code the turn would have if it ended here."""
        for item in self.segments.feed(event):
            self.code = self._item(item)
        return self.code

    def _item(self, item: Item) -> int:
        match item:
            case TurnStarted() | SegmentOpened() | StreamReset() | ToolProgress() | ToolCallDelta():
                pass
            case ApprovalRequested() | ApprovalResolved():
                pass  # a one-shot asks nobody: a tool that asks is refused (tools.approval)
            case ElicitationRequested() | ElicitationResolved():
                pass  # asked of nobody here: declined before it is an event
            case SegmentGrown(delta=delta):
                if self.stream:
                    self._write(delta)
            case SegmentReset(text=text, reason=reason):
                if self.stream:
                    # stdout cannot be unprinted: say so, then the replay on a new line.
                    if self.line_open:
                        self._write("\n")
                    self.err.write(f"iris: {reason}; the answer restarts\n")
                    if text:
                        self._write(text)
            case SegmentClosed(text=text, ending=ending):
                if not self.stream and text:
                    self._write(text)
                if ending == "commentary":
                    self._write("\n\n")
            case ReasoningDelta(text=text):
                if self.show_reasoning:
                    self.err.write(text)
                    self.err.flush()
                    self.reasoning_open = True
            case ToolStarted(name=name, args=args):
                self.err.write(tool_label(name, args, verbose=False) + "\n")
            case ToolEnded(ok=ok, duration=duration):
                self.err.write(f"  {'✓' if ok else '✗'} {duration:.1f} s\n")
            case TurnEnded(reason=reason):
                if self.line_open:
                    self._write("\n")
                if reason == "interrupted":
                    self.err.write("iris: interrupted\n")
                    return 130
                if reason == "length":
                    self.err.write("iris: the answer was cut at model.max_output_chars\n")
                return 0
            case TurnFailed(message=message):
                if self.line_open:
                    self._write("\n")
                self.err.write(f"iris: {message}\n")
                return 1
            case _:
                assert_never(item)
        return 1

"""The reply renderer: one turn's events in, terminal output out. Pure: no I/O, clock injected.

A terminal cannot unprint, so every ``Frame`` has two parts. ``commit`` is printed once above
the live area and never changes: box borders, finished lines (styled by ``MarkdownLines``),
tool results, the footer. ``live`` is the unfinished tail the transport redraws in place: the
current line of text and the running tool. Text is released in batches (``batch_interval``,
50 ms): a model emitting 200 tokens a second costs the terminal ~20 writes, not 200. The first
text of a box and everything that is not text release at once, so nothing feels late.

Without a terminal (``box=False``) there is no live area and no styling: text is committed as
it arrives, plain, with no borders, so a pipe or a file gets exactly the words.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from iris.agent.forms import fields
from iris.config import ToolProgressMode
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
from iris.formats import visible
from iris.formats.tool_summary import summarize
from iris.segments import (
    Item,
    SegmentClosed,
    SegmentGrown,
    SegmentOpened,
    SegmentReset,
    Segments,
)
from iris.surfaces.cli.markdown import MarkdownLines, Piece

Block = Literal["reasoning", "answer"]
_ARG_PREVIEW = 60  # characters of a tool's main argument on its line
_DETAIL_LINES = 6  # lines of tool output shown in verbose mode
_LIVE_ROWS = 4  # an unfinished line longer than this many rows is committed a row at a time


@dataclass(frozen=True, slots=True)
class Frame:
    commit: tuple[Piece, ...] = ()  # print once, above the live area
    live: tuple[Piece, ...] = ()  # the whole live area now (replaces what it showed)


@dataclass(frozen=True, slots=True)
class RenderOptions:
    width: int = 80
    box: bool = True  # False when stdout is not a terminal: plain text, no borders, no live area
    streaming: bool = True  # False: each segment appears whole when it closes
    show_reasoning: bool = False
    tool_progress: ToolProgressMode = "all"
    batch_interval: float = 0.05
    title: str = "Iris"
    heading: str = ""  # a line the reply opens with (a scheduled run's ``⏰`` and its prompt)


class ReplyRenderer:
    """Renders one turn. ``feed`` each event; when ``due()`` passes with no event, ``flush``."""

    def __init__(self, options: RenderOptions, clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self.clock = clock
        self._heading = options.heading
        self._pending: list[Piece] = []
        self._dirty = False  # the live area changed since the last frame
        self._released_at: float | None = None
        self._at_line_start = True
        self._block: Block | None = None
        self._lines = MarkdownLines(options.width)
        self._partial = ""  # the unfinished line of the open block
        self._held_reasoning = ""  # streaming off: reasoning not shown yet
        self._segments = Segments()
        self._tool: tuple[Piece, ...] = ()  # live line of the running tool
        self._tool_shown = False
        self._last_tool = ""

    # -- the interface -----------------------------------------------------------------------
    def feed(self, event: Event) -> Frame | None:
        """Take one event; return what to show now, or None while text waits for its batch."""
        release = False
        for item in self._segments.feed(event):
            release = self._item(item) or release
        return self.flush() if release else None

    def _item(self, item: Item) -> bool:
        """Take one item of the segment model; say whether what it changed shows at once."""
        match item:
            case TurnStarted() | SegmentOpened():
                return False
            case ReasoningDelta(text=text):
                if not self.options.show_reasoning:
                    return False
                if not self.options.streaming:
                    self._held_reasoning += text
                    return False
                return self._stream("reasoning", text)
            case SegmentGrown(delta=delta):
                return self.options.streaming and self._stream("answer", delta)
            case SegmentReset(text=text, reason=reason):
                if self.options.streaming:
                    # What is printed stays: mark where the reply restarts and print the replay.
                    self._reset(reason)
                    self._stream("answer", text)
            case StreamReset(reason=reason):
                if self._block == "reasoning" and self.options.streaming:
                    self._reset(reason)  # the reasoning replays; the text resets as facts
            case SegmentClosed(text=text, ending=ending):
                self._close_segment(text, commentary=ending == "commentary")
            case ToolStarted():
                self._tool_started(item)
            case ToolProgress(note=note):
                self._tool_progress(note)
            case ToolEnded():
                self._tool_ended(item)
            case ToolCallDelta():
                pass  # the terminal chat offers the agent's own tools only, never a client's
            case ApprovalRequested():
                self._approval_asked(item)
            case ApprovalResolved():
                self._approval_resolved(item)
            case ElicitationRequested():
                self._elicitation_asked(item)
            case ElicitationResolved():
                self._elicitation_resolved(item)
            case TurnEnded():
                self._turn_ended(item)
            case TurnFailed(message=message):
                self._show_held()
                self._close_block()
                self._end_tool()
                self._commit(("class:error", f"✗ {message}"), ("", "\n"))
            case _:
                assert_never(item)
        return True

    def due(self) -> float | None:
        """When held output must be shown even if no event arrives (None: nothing held)."""
        if not (self._pending or self._dirty):
            return None
        return (self._released_at or 0.0) + self.options.batch_interval

    def flush(self) -> Frame | None:
        """Release everything held now."""
        if not (self._pending or self._dirty):
            return None
        frame = Frame(tuple(self._pending), self._live())
        self._pending.clear()
        self._dirty = False
        self._released_at = self.clock()
        return frame

    # -- text --------------------------------------------------------------------------------
    def _stream(self, block: Block, text: str) -> bool:
        """Show ``text`` in ``block``; say whether it is released now or waits for its batch."""
        opened = self._block != block
        if opened:
            self._close_block()
            self._open_block(block)
        self._append(text)
        released = self._released_at
        return opened or released is None or self.clock() - released >= self.options.batch_interval

    def _append(self, text: str) -> None:
        style = "class:reasoning" if self._block == "reasoning" else ""
        if not self.options.box:
            self._commit((style, text))
            return
        *finished, self._partial = (self._partial + text).split("\n")
        for line in finished:
            self._commit(*self._style(line), ("", "\n"))
        self._wrap_long_partial()
        self._dirty = True

    def _wrap_long_partial(self) -> None:
        """Commit the head of a very long unfinished line, broken at a space like the terminal
        would wrap it: a live area taller than the screen would hide the tail being written.
        The cuts depend only on the text, so output stays independent of delta boundaries."""
        width = self.options.width
        while len(self._partial) > width * _LIVE_ROWS:
            head = self._partial[:width]
            cut = head.rfind(" ") + 1 or width
            self._commit(*self._style(self._partial[:cut], finished=False), ("", "\n"))
            self._partial = self._partial[cut:]

    def _style(self, line: str, *, finished: bool = True) -> list[Piece]:
        if self._block == "reasoning":
            return [("class:reasoning", line)]
        return self._lines.line(line) if finished else self._lines.partial(line)

    def _open_block(self, block: Block) -> None:
        self._end_tool()
        self._block = block
        self._lines = MarkdownLines(self.options.width)
        if not self.options.box:
            if block == "reasoning":
                self._commit(("", "(reasoning)\n"))
            self._open_heading(block)
            return
        title = "reasoning" if block == "reasoning" else self.options.title
        style = "class:reasoning.box" if block == "reasoning" else "class:box"
        self._commit((style, self._rule(f"╭─ {title} ")), ("", "\n"))
        self._open_heading(block)

    def _open_heading(self, block: Block) -> None:
        """The heading, as the first line of the reply's first box of text."""
        if block == "reasoning" or not self._heading:
            return
        self._commit(("class:commentary", self._heading), ("", "\n"))
        self._heading = ""

    def _close_block(self, *, commentary: bool = False) -> None:
        block = self._block
        if block is None:
            return
        if self.options.box:
            if self._partial:
                pieces = self._style(self._partial)
                if commentary:
                    pieces = [(f"{style} class:commentary".strip(), text) for style, text in pieces]
                self._commit(*pieces, ("", "\n"))
                self._partial = ""
                self._dirty = True
            if block == "reasoning":
                self._commit(("class:reasoning.box", self._rule("╰")), ("", "\n"))
            elif commentary:
                # A dotted edge: this text accompanied tool calls; the answer is still to come.
                self._commit(("class:box.commentary", self._rule("╰", "┄")), ("", "\n"))
            else:
                self._commit(("class:box", self._rule("╰")), ("", "\n"))
        elif not self._at_line_start:
            self._commit(("", "\n"))
        if block == "reasoning" and not self.options.box:
            self._commit(("", "\n"))
        self._block = None

    def _close_segment(self, text: str, *, commentary: bool) -> None:
        self._show_held(text if not self.options.streaming else "", commentary=commentary)
        self._close_block(commentary=commentary)

    def _show_held(self, text: str = "", *, commentary: bool = False) -> None:
        """Streaming off: show the held reasoning and the closed segment's text, whole, in
        their boxes."""
        if self._held_reasoning:
            self._open_block("reasoning")
            self._append(self._held_reasoning)
            self._close_block()
            self._held_reasoning = ""
        if text:
            self._open_block("answer")
            if commentary and self.options.box:
                for line in text.split("\n"):
                    self._commit(("class:commentary", line), ("", "\n"))
            else:
                self._append(text)

    def _reset(self, reason: str) -> None:
        """A replay diverged from what is printed: it stays, so mark where the reply restarts."""
        self._partial = ""
        self._dirty = True
        self._lines = MarkdownLines(self.options.width)
        if self._block is None:
            return
        if not self._at_line_start:
            self._commit(("", "\n"))
        self._commit(("class:reset", f"↻ {reason}; the reply restarts"), ("", "\n"))

    # -- tools -------------------------------------------------------------------------------
    def _tool_started(self, event: ToolStarted) -> None:
        self._show_held()
        self._close_block()
        self._end_tool()
        mode = self.options.tool_progress
        self._tool_shown = mode in ("all", "verbose") or (
            mode == "new" and event.name != self._last_tool
        )
        self._last_tool = event.name
        if not self._tool_shown:
            return
        label = tool_label(event.name, event.args, verbose=mode == "verbose")
        if self.options.box and mode != "verbose":
            # Running: a live line; it is committed once, with its result, when the tool ends.
            self._tool = (("class:tool", label), ("class:tool.running", " …"))
            self._dirty = True
        else:
            self._commit(("class:tool", label), ("", "\n"))

    def _tool_progress(self, note: str) -> None:
        if not self._tool_shown or not note:
            return
        note = note.strip().splitlines()[-1][: self.options.width] if note.strip() else ""
        if self._tool:
            self._tool = (self._tool[0], ("class:tool.running", f" … {note}"))
            self._dirty = True
        elif self.options.tool_progress == "verbose":
            self._commit(("class:tool.detail", f"┊   {note}"), ("", "\n"))

    def _tool_ended(self, event: ToolEnded) -> None:
        if not self._tool_shown:
            return
        mark = ("class:tool.ok", "✓") if event.ok else ("class:tool.fail", "✗")
        took = f" {event.duration:.1f} s"
        tail = event.output_preview.strip().splitlines()
        if self._tool:
            self._commit(self._tool[0], ("", "  "), mark, ("class:tool", took))
            self._tool = ()
            self._dirty = True
        else:
            self._commit(("class:tool", "┊   "), mark, ("class:tool", took))
        if not event.ok and tail and self.options.tool_progress != "verbose":
            self._commit(("class:tool.fail", f"  {tail[-1][: self.options.width]}"))
        self._commit(("", "\n"))
        if self.options.tool_progress == "verbose":
            for line in tail[-_DETAIL_LINES:]:
                self._commit(("class:tool.detail", f"┊   │ {line}"), ("", "\n"))
        self._tool_shown = False

    def _approval_asked(self, event: ApprovalRequested) -> None:
        # The whole command, every line, drawn as the shell reads it (a backspace or a carriage
        # return would make the terminal overwrite what it showed): the person answers for
        # what will run (the prompt itself is the screen's status line, so the reply's box is
        # never broken).
        self._commit(("class:approval", f"┊ ⚠ {event.name} waits for your approval:"), ("", "\n"))
        alarm = visible.warning(event.preview)
        if alarm:
            self._commit(("class:approval", f"┊ {alarm}"), ("", "\n"))
        for line in visible.shown(event.preview).split("\n"):
            self._commit(("class:tool.detail", f"┊   │ {line}"), ("", "\n"))
        self._dirty = True

    def _approval_resolved(self, event: ApprovalResolved) -> None:
        ok = event.decision in ("once", "chat")
        mark = ("class:tool.ok", "✓") if ok else ("class:tool.fail", "✗")
        said = {
            "once": f"allowed once by {event.by}",
            "chat": f"allowed in this chat by {event.by}",
            "deny": f"denied by {event.by}",
            "timeout": "not approved: nobody answered in time",
            "cancelled": "not approved: the turn was interrupted",
        }[event.decision]
        self._commit(("class:tool", "┊ "), mark, ("class:tool", f" {said}"), ("", "\n"))
        self._dirty = True

    def _elicitation_asked(self, event: ElicitationRequested) -> None:
        # What the server asks and its fields, printed; the prompt is the status line's.
        self._commit(("class:approval", f"┊ ❓ {event.server} asks: {event.message}"), ("", "\n"))
        if event.url:
            self._commit(("class:tool.detail", f"┊   │ open: {event.url}"), ("", "\n"))
        for field in fields(event.schema):
            hint = f"  [{field.hint}]" if field.hint else ""
            self._commit(("class:tool.detail", f"┊   │ {field.question}{hint}"), ("", "\n"))
        self._dirty = True

    def _elicitation_resolved(self, event: ElicitationResolved) -> None:
        ok = event.action == "accept"
        mark = ("class:tool.ok", "✓") if ok else ("class:tool.fail", "✗")
        said = {
            "accept": f"answered by {event.by}",
            "decline": f"declined by {event.by}",
            "cancel": f"cancelled ({event.by})",
            "timeout": "declined: nobody answered in time",
        }.get(event.action, event.action)
        self._commit(("class:tool", "┊ "), mark, ("class:tool", f" {said}"), ("", "\n"))
        self._dirty = True

    def _end_tool(self) -> None:
        """A tool line still live when something else starts is committed as it is."""
        if self._tool:
            self._commit(self._tool[0], ("", "\n"))
            self._tool = ()
            self._dirty = True

    # -- the end -----------------------------------------------------------------------------
    def _turn_ended(self, event: TurnEnded) -> None:
        self._show_held()
        self._close_block()
        self._end_tool()
        parts: list[Piece] = []
        if event.reason == "interrupted":
            parts.append(("class:interrupted", "⏹ interrupted · "))
        elif event.reason == "max_iterations":
            parts.append(("class:interrupted", "stopped at tools.max_iterations · "))
        elif event.reason == "length":
            parts.append(("class:interrupted", "cut at model.max_output_chars · "))
        parts.append(("class:footer", _footer(event.model, event.usage)))
        self._commit(*parts, ("", "\n"))

    # -- output ------------------------------------------------------------------------------
    def _commit(self, *pieces: Piece) -> None:
        for style, text in pieces:
            if not text:
                continue
            self._pending.append(("", text) if not self.options.box else (style, text))
            self._at_line_start = text.endswith("\n")

    def _live(self) -> tuple[Piece, ...]:
        if not self.options.box:
            return ()
        pieces: list[Piece] = []
        if self._partial:
            pieces.extend(self._style(self._partial, finished=False))
        if self._tool:
            if pieces:
                pieces.append(("", "\n"))
            pieces.extend(self._tool)
        return tuple(pieces)

    def _rule(self, head: str, fill: str = "─") -> str:
        return head + fill * max(3, self.options.width - len(head))


def tool_label(name: str, args: dict[str, Any], *, verbose: bool) -> str:
    """``┊ ⚡ terminal: "ls -la"`` — the line that says a tool started (also used by ``-q``)."""
    full = json.dumps(args, ensure_ascii=False) if args else ""
    shown = full if verbose else _main_arg(args)
    return f"┊ ⚡ {name}: {shown}" if shown else f"┊ ⚡ {name}"


def _main_arg(args: dict[str, Any]) -> str:
    """The argument that says what the call does (the command, the path), quoted, shortened."""
    summary = summarize(args, _ARG_PREVIEW)
    return json.dumps(summary, ensure_ascii=False) if summary else ""


def _footer(model: str, usage: dict[str, int]) -> str:
    inp, out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    tokens = f" · {inp} in · {out} out tokens" if inp or out else ""
    return f"{model or 'model'}{tokens}"

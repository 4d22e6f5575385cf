"""The tool-progress message of a chat reply: which lines each ``display.tool_progress`` mode shows.

Pure: tool events in, lines out. The consumer puts the lines of one batch of tool calls (the
calls between two text segments) into one message and edits it in place.

- ``off``: nothing.
- ``new``: a line when a tool starts whose name differs from the previous tool's.
- ``all``: a line for every tool call, with a short summary of its arguments.
- ``verbose``: every call with its arguments, its progress notes and its result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import assert_never

from iris.config import ToolProgressMode
from iris.events import ToolEnded, ToolProgress, ToolStarted
from iris.formats.tool_summary import clip, summarize

ToolEvent = ToolStarted | ToolProgress | ToolEnded

_SUMMARY = 60
_VERBOSE_ARGS = 300
_VERBOSE_OUTPUT = 200


@dataclass
class ToolLines:
    mode: ToolProgressMode
    lines: list[str] = field(default_factory=list[str])
    _last_name: str = ""

    def apply(self, event: ToolEvent) -> bool:
        """Update the lines; True when they changed."""
        match self.mode:
            case "off":
                return False
            case "new":
                if not isinstance(event, ToolStarted) or event.name == self._last_name:
                    return False
                self._last_name = event.name
                self.lines.append(f"🔧 {event.name}")
                return True
            case "all":
                if not isinstance(event, ToolStarted):
                    return False
                summary = summarize(event.args, _SUMMARY)
                self.lines.append(f"🔧 {event.name}: {summary}" if summary else f"🔧 {event.name}")
                return True
            case "verbose":
                return self._verbose(event)
            case _:
                assert_never(self.mode)

    def _verbose(self, event: ToolEvent) -> bool:
        match event:
            case ToolStarted(name=name, args=args):
                self.lines.append(f"🔧 {name}({clip(json.dumps(args), _VERBOSE_ARGS)})")
            case ToolProgress(name=name, note=note):
                self.lines.append(f"   … {clip(note, _VERBOSE_OUTPUT)}")
            case ToolEnded(ok=ok, duration=duration, output_preview=preview):
                mark = "✓" if ok else "✗"
                line = f"   {mark} {duration:.1f}s"
                if preview.strip():
                    line += f": {clip(preview, _VERBOSE_OUTPUT)}"
                self.lines.append(line)
            case _:
                assert_never(event)
        return True

    def text(self) -> str:
        return "\n".join(self.lines)

"""The stream layout (Slack streams): as edits, without a cursor, every message sealed.

Every message is *sealed*: its last action carries ``final`` even when the text did not change,
so the transport can end the stream. A tool batch carries its calls as ``Task``s for a native
timeline (running → complete / error).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iris.events import ToolEnded, ToolProgress, ToolStarted
from iris.formats.tool_summary import summarize
from iris.surfaces.chat.platforms.base import Task
from iris.surfaces.chat.reply.calls import Edit, Slot
from iris.surfaces.chat.reply.layout import Layout

if TYPE_CHECKING:
    from iris.surfaces.chat.reply.plan import Reply


class StreamLayout(Layout):
    cursor = ""

    def __init__(self, plan: Reply, *, preview: bool) -> None:
        super().__init__(plan, preview=preview)
        self._tasks: dict[str, Task] = {}

    def growing(self, text: str) -> str:
        """A stream cannot take text back, and the settled text loses its trailing whitespace:
        a stream shows the text up to its last visible character, so the final text extends
        what it shows (else the stream would end and the message go on by ``chat.update``)."""
        return text.rstrip()

    # -- the timeline -----------------------------------------------------------------------------
    def tool(self, event: ToolStarted | ToolProgress | ToolEnded) -> None:
        key = str(event.index)
        match event:
            case ToolStarted(name=name, args=args):
                summary = summarize(args, 60)
                title = f"{name}: {summary}" if summary else name
                self._tasks[key] = Task(key, title, "in_progress")
            case ToolProgress(note=note) if key in self._tasks and note:
                old = self._tasks[key]
                self._tasks[key] = Task(key, old.title, old.status, note)
            case ToolEnded(ok=ok) if key in self._tasks:
                old = self._tasks[key]
                self._tasks[key] = Task(key, old.title, "complete" if ok else "error", old.details)
            case _:
                return
        plan = self.plan
        if plan.tools_slot is not None and not plan.slots[plan.tools_slot].dead:
            plan.slots[plan.tools_slot].tasks = self.tasks()

    def tasks(self) -> tuple[Task, ...]:
        return tuple(self._tasks.values())

    def tools_done(self) -> None:
        self._tasks = {}

    # -- sealing ----------------------------------------------------------------------------------
    def pending(self, slot: Slot) -> bool:
        if slot.pending:
            return True
        # A message whose text is complete still needs its stream ended, and a tool call that
        # finished changes the timeline, not the text.
        return (
            not slot.dead
            and not slot.sealed
            and slot.shown is not None
            and bool(slot.want)
            and (slot.final or slot.tasks != slot.shown_tasks)
        )

    def sends_final(self, slot: Slot) -> bool:
        # A timeline is always streamed (then ended by its final edit), even when the batch is
        # over before its message goes out.
        return slot.final and not slot.tasks

    def cleanup(self, index: int, slot: Slot, message_id: str, shown: str) -> Edit | None:
        if not slot.sealed:
            # An abandoned stream: end it as it stands.
            return Edit(index, message_id, shown, cleanup=True, final=True)
        return super().cleanup(index, slot, message_id, shown)

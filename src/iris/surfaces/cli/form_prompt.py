"""An MCP server's request for input, asked in ``iris chat``'s status line one field at a time.

The request itself is printed in the reply (``render.py``: the server's question, its fields,
the choices numbered); the prompt goes in the screen's status line (``Screen.question``), like
an approval's. Each line typed answers the field asked (``iris.agent.forms.Filling``: an enum
by its number or name, a boolean y/n, the required fields marked ``*``); one that cannot be
read or does not fit is asked again with the reason, Enter alone on a required field declines.
The finished answer goes to the chat's broker (``Elicitations.respond``), which checks it
against the schema once more.
"""

from __future__ import annotations

from iris.agent.elicitation import ElicitationError, Elicitations
from iris.agent.forms import Filling
from iris.events import ElicitationRequested
from iris.surfaces.cli.screen import Screen


class FormPrompt:
    """The request being asked in this chat (one at a time: the turn waits on it)."""

    def __init__(self, screen: Screen, broker: Elicitations, chat_id: str, by: str) -> None:
        self.screen, self.broker, self.chat_id, self.by = screen, broker, chat_id, by
        self._asking: tuple[ElicitationRequested, Filling] | None = None

    def open(self, request: ElicitationRequested) -> None:
        self._asking = (request, Filling(request.schema))
        self._ask()

    def close(self, elicitation_id: str) -> None:
        """The request ended (answered, or timed out): its prompt goes."""
        if self._asking is not None and self._asking[0].elicitation_id == elicitation_id:
            self._asking = None
            self.screen.unquestion()

    def _ask(self) -> None:
        assert self._asking is not None
        request, filling = self._asking
        self.screen.question(prompt(request, filling), self._give)

    def _give(self, typed: str) -> None:
        if self._asking is None:
            return
        request, filling = self._asking
        answer = filling.give(typed)
        if answer is None:
            self._ask()
            return
        try:
            self.broker.respond(
                request.elicitation_id,
                answer.action,
                answer.content,
                chat_id=self.chat_id,
                by=self.by,
            )
        except ElicitationError as exc:  # the form as a whole does not fit: from the start
            self._asking = (request, Filling(request.schema))
            self._asking[1].problem = exc.message
            self._ask()


def prompt(request: ElicitationRequested, filling: Filling) -> str:
    """The status line's question: the field (or yes/no), how to answer, why the last answer
    was not taken."""
    field = filling.current
    if field is None:
        asked = "opened the link? continue" if request.url else request.message
        line = f"{asked} y/n"
    else:
        hint = f" [{field.hint}]" if field.hint else ""
        empty = "declines" if field.required else "skips"
        line = f"{field.question}{hint} (empty {empty})"
    # The reason first: a narrow terminal cuts the line's end.
    return f"✗ {filling.problem} · {line}" if filling.problem else line

"""ElicitationCard: an MCP server asking the person for input, as the Textual app shows it.

The chat's view model keeps one card per ``elicitation_id`` (a bubble of kind ``elicitation``
under the turn): ``elicitation.request`` makes it — the server's message, the form's fields
(``iris.agent.forms``: primitives, an enum as choices, the required ones marked) or the link of
a URL-mode request — ``elicitation.resolved`` ends it, and an ``error`` frame coded
``elicitation_invalid`` (or ``elicitation_unknown``) is the reason this device's answer was
refused: the card shows it and stays open, with what was entered.

The twin of ``ElicitationCard`` in ``src/iris/web/js/elicitation.js``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from iris.agent.forms import Field, fields

OUTCOMES = {
    "accept": "Answered",
    "decline": "Declined",
    "cancel": "Cancelled",
    "timeout": "Declined: nobody answered in time",
}


@dataclass
class ElicitationCard:
    elicitation_id: str
    server: str
    message: str
    fields: list[Field]
    expires_at: float
    url: str = ""
    outcome: str = ""  # what the card says once it is over; "" while it waits
    note: str = ""  # why this device's last answer was refused
    values: dict[str, Any] = field(default_factory=dict[str, Any])  # what the person entered

    @classmethod
    def of(cls, frame: dict[str, Any]) -> ElicitationCard:
        """The card of an ``elicitation.request`` frame."""
        return cls(
            str(frame["elicitation_id"]),
            str(frame.get("server", "")),
            str(frame.get("message", "")),
            fields(frame.get("schema") or {}),
            float(frame.get("expires_at", 0)),
            str(frame.get("url", "")),
        )

    @property
    def pending(self) -> bool:
        return not self.outcome

    @property
    def head(self) -> str:
        return f"{self.server} asks: {self.message}"

    def resolve(self, action: str, by: str) -> None:
        who = f" by {by}" if by and action != "timeout" else ""
        self.outcome = f"{OUTCOMES.get(action, action)}{who}"
        self.note = ""

    def refused(self, message: str) -> None:
        self.note = message


def is_elicitation_error(code: str) -> bool:
    return code.startswith("elicitation_")
